import { Clock, Duration, Effect, Either, HashMap, Layer, Option } from "effect"
import { type NewOutboxEvent, OutboxEvent } from "../../domain/OutboxEvent.js"
import type { OutboxBacklog, OutboxLane, OutboxStatus } from "../../domain/OutboxEvent.js"
import { PersistenceError } from "../../domain/PersistenceError.js"
import {
  type DeliveryOutcome,
  isBeforeCursor,
  outboxCountsOf,
  OutboxEventNotDead,
  OutboxEventNotFound,
  type OutboxListCursor,
  OutboxRepository,
  pendingEventFields
} from "../../services/outbox/OutboxRepository.js"
import { MemoryDatabase, type MemoryTables } from "./MemoryDatabase.js"

const plus = (now: Date, span: Duration.Duration) => new Date(now.getTime() + Duration.toMillis(span))

const changed = (event: OutboxEvent, now: Date, changes: Partial<OutboxEvent>) =>
  new OutboxEvent({ ...event, ...changes, updatedAt: now }, { disableValidation: true })

const withEvent = (tables: MemoryTables, event: OutboxEvent): MemoryTables => ({
  ...tables,
  outboxEvent: HashMap.set(tables.outboxEvent, event.id, event)
})

const dispatchOrder = (a: OutboxEvent, b: OutboxEvent) =>
  a.availableAt.getTime() - b.availableAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/**
 * `event` inserted into `tables` as a new pending row, or the existing event's id when its dedupe
 * key is taken (the unique key's idempotency). Pure, so a lifecycle write can add its event
 * in the same serialized write.
 */
export const insertOutboxEvent = (
  tables: MemoryTables,
  event: NewOutboxEvent,
  now: Date
): readonly [{ readonly eventId: string; readonly duplicate: boolean }, MemoryTables] => {
  const existing = HashMap.get(tables.outboxEventByDedupeKey, event.dedupeKey)
  if (Option.isSome(existing)) return [{ eventId: existing.value, duplicate: true }, tables]
  const row = new OutboxEvent(
    { ...pendingEventFields(event), availableAt: plus(now, event.delay), createdAt: now, updatedAt: now },
    { disableValidation: true }
  )
  const next = withEvent(tables, row)
  return [
    { eventId: row.id, duplicate: false },
    { ...next, outboxEventByDedupeKey: HashMap.set(next.outboxEventByDedupeKey, row.dedupeKey, row.id) }
  ]
}

/** `outbox_event` in memory; a claim is one serialized write, so two dispatchers never share an event. */
export const makeMemoryOutboxRepository = Effect.gen(function*() {
  const db = yield* MemoryDatabase

  const findById = (eventId: string) => db.read((tables) => HashMap.get(tables.outboxEvent, eventId))

  const findByAggregate = (aggregateId: string) =>
    db.read((tables) =>
      Array.from(HashMap.values(tables.outboxEvent))
        .filter((event) => event.aggregateId === aggregateId)
        .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    )

  const createInTransaction = (event: NewOutboxEvent) =>
    db.write<{ readonly eventId: string; readonly duplicate: boolean }, never>(
      "outbox_event.create",
      (tables, now) => Either.right(insertOutboxEvent(tables, event, now))
    )

  const createManyInTransaction = (events: ReadonlyArray<NewOutboxEvent>) =>
    db.write<void, PersistenceError>("outbox_event.createMany", (tables, now) => {
      let next = tables
      for (const event of events) {
        const [inserted, after] = insertOutboxEvent(next, event, now)
        // The unique dedupe key refuses the whole statement, as MySQL's multi-row INSERT does.
        if (inserted.duplicate) {
          return Either.left(
            new PersistenceError({ operation: "outbox_event.createMany", message: "a dedupe key is already used" })
          )
        }
        next = after
      }
      return Either.right([undefined, next] as const)
    })

  const claimBatch = (dispatcherId: string, limit: number, lane: OutboxLane = "enqueue") =>
    db.write("outbox_event.claimBatch", (tables, now) => {
      const claimed = Array.from(HashMap.values(tables.outboxEvent))
        .filter((event) =>
          event.lane === lane && event.status === "pending" && event.availableAt.getTime() <= now.getTime()
        )
        .sort(dispatchOrder)
        .slice(0, limit)
        .map((event) => changed(event, now, { status: "processing", lockedBy: dispatcherId, lockedAt: now }))
      // As on MySQL, the claimed events carry their job's trace context; the stored ones do not.
      const withTrace = claimed.map((event) =>
        Option.match(event.aggregateType === "AiJob" ? HashMap.get(tables.aiJob, event.aggregateId) : Option.none(), {
          onNone: () => event,
          onSome: (job) => new OutboxEvent({ ...event, traceParent: job.traceParent }, { disableValidation: true })
        })
      )
      return Either.right([withTrace, claimed.reduce(withEvent, tables)] as const)
    })

  /** Applies `change` to an event this dispatcher still holds; `None` if it does not. */
  const whileClaimed = <A>(
    operation: string,
    eventId: string,
    dispatcherId: string,
    change: (event: OutboxEvent, now: Date) => readonly [A, OutboxEvent]
  ) =>
    db.write(operation, (tables, now) => {
      const event = HashMap.get(tables.outboxEvent, eventId)
      if (Option.isNone(event) || event.value.status !== "processing" || event.value.lockedBy !== dispatcherId) {
        return Either.right([Option.none<A>(), tables] as const)
      }
      const [result, updated] = change(event.value, now)
      return Either.right([Option.some(result), withEvent(tables, updated)] as const)
    })

  const markPublishedMany = (eventIds: ReadonlyArray<string>, dispatcherId: string) =>
    db.write("outbox_event.markPublishedMany", (tables, now) => {
      const held = eventIds.flatMap((eventId) =>
        Option.toArray(HashMap.get(tables.outboxEvent, eventId)).filter((event) =>
          event.status === "processing" && event.lockedBy === dispatcherId
        )
      )
      const published = held.map((event) => changed(event, now, { status: "published", publishedAt: now }))
      return Either.right([published.length, published.reduce(withEvent, tables)] as const)
    })

  const markPublishedDirect = (eventIds: ReadonlyArray<string>) =>
    db.write("outbox_event.markPublishedDirect", (tables, now) => {
      const pending = eventIds.flatMap((eventId) =>
        Option.toArray(HashMap.get(tables.outboxEvent, eventId)).filter((event) => event.status === "pending")
      )
      const published = pending.map((event) => changed(event, now, { status: "published", publishedAt: now }))
      return Either.right([published.length, published.reduce(withEvent, tables)] as const)
    })

  const markDispatchFailed: OutboxRepository["Type"]["markDispatchFailed"] = (eventId, dispatcherId, error, options) =>
    whileClaimed("outbox_event.markDispatchFailed", eventId, dispatcherId, (event, now) => {
      const attemptCount = event.attemptCount + 1
      const dead = attemptCount >= options.maxAttempts
      return [
        dead ? "dead" as const : "retry_scheduled" as const,
        changed(event, now, {
          status: dead ? "dead" : "pending",
          attemptCount,
          availableAt: dead ? event.availableAt : plus(now, options.retryDelay),
          lastError: error.slice(0, 2000),
          lockedBy: null,
          lockedAt: null
        })
      ] as const
    })

  const settleDelivery: OutboxRepository["Type"]["settleDelivery"] = (eventId, dispatcherId, settlement) =>
    whileClaimed(
      "outbox_event.settleDelivery",
      eventId,
      dispatcherId,
      (event, now): readonly [DeliveryOutcome, OutboxEvent] => {
        const deliveredTo = settlement.deliveredTo
        switch (settlement._tag) {
          case "Delivered":
            return ["published", changed(event, now, { status: "published", publishedAt: now, deliveredTo })]
          case "RetryLater":
            return [
              "retry_scheduled",
              changed(event, now, {
                status: "pending",
                deliveredTo,
                attemptCount: event.attemptCount + 1,
                availableAt: plus(now, settlement.retryDelay),
                lastError: settlement.error.slice(0, 2000),
                lockedBy: null,
                lockedAt: null
              })
            ]
          case "GiveUp":
            return [
              "dead",
              changed(event, now, {
                status: "dead",
                deliveredTo,
                attemptCount: event.attemptCount + 1,
                lastError: settlement.error.slice(0, 2000),
                lockedBy: null,
                lockedAt: null
              })
            ]
        }
      }
    )

  const releaseClaimsOf = (dispatcherId: string) =>
    db.write("outbox_event.releaseClaimsOf", (tables, now) => {
      const held = Array.from(HashMap.values(tables.outboxEvent)).filter((event) =>
        event.status === "processing" && event.lockedBy === dispatcherId
      )
      const released = held.map((event) => changed(event, now, { status: "pending", lockedBy: null, lockedAt: null }))
      return Either.right([released.length, released.reduce(withEvent, tables)] as const)
    })

  const releaseExpiredLocks = (lockTtl: Duration.Duration) =>
    db.write("outbox_event.releaseExpiredLocks", (tables, now) => {
      const expired = Array.from(HashMap.values(tables.outboxEvent)).filter((event) =>
        event.status === "processing" && event.lockedAt !== null &&
        event.lockedAt.getTime() < now.getTime() - Duration.toMillis(lockTtl)
      )
      const released = expired.map((event) =>
        changed(event, now, { status: "pending", lockedBy: null, lockedAt: null })
      )
      return Either.right([released.length, released.reduce(withEvent, tables)] as const)
    })

  /** Age of the oldest event in `statuses`, by the Clock; None when there is none. */
  const oldestAgeMs = (statuses: ReadonlyArray<OutboxStatus>) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      db.read((tables) => {
        const created = Array.from(HashMap.values(tables.outboxEvent))
          .filter((event) => statuses.includes(event.status))
          .map((event) => event.createdAt.getTime())
        return created.length === 0 ? Option.none<number>() : Option.some(Math.max(0, now - Math.min(...created)))
      }))

  const backlogOf = (lane: OutboxLane) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      db.read((tables): OutboxBacklog => {
        const events = Array.from(HashMap.values(tables.outboxEvent)).filter((event) => event.lane === lane)
        const unpublished = events.filter((event) => event.status === "pending" || event.status === "processing")
        return {
          unpublished: unpublished.length,
          dead: events.filter((event) => event.status === "dead").length,
          // From `now` down to the oldest creation: 0 when nothing is unpublished.
          oldestUnpublishedAgeMs: now -
            unpublished.reduce((oldest, event) => Math.min(oldest, event.createdAt.getTime()), now)
        }
      }))

  const countByStatus = db.read((tables) =>
    outboxCountsOf(Array.from(HashMap.values(tables.outboxEvent), (event) => ({ status: event.status, total: 1 })))
  )

  const replayDead = (eventId: string) =>
    db.write<OutboxEvent, OutboxEventNotFound | OutboxEventNotDead>("outbox_event.replayDead", (tables, now) => {
      const event = HashMap.get(tables.outboxEvent, eventId)
      if (Option.isNone(event)) return Either.left(new OutboxEventNotFound({ eventId }))
      if (event.value.status !== "dead") {
        return Either.left(new OutboxEventNotDead({ eventId, status: event.value.status }))
      }
      const replayed = changed(event.value, now, {
        status: "pending",
        attemptCount: 0,
        availableAt: now,
        lastError: null,
        lockedBy: null,
        lockedAt: null
      })
      return Either.right([replayed, withEvent(tables, replayed)] as const)
    })

  const replayAllDead = db.write<number, never>("outbox_event.replayAllDead", (tables, now) => {
    const replayed = Array.from(HashMap.values(tables.outboxEvent))
      .filter((event) => event.status === "dead")
      .map((event) =>
        changed(event, now, {
          status: "pending",
          attemptCount: 0,
          availableAt: now,
          lastError: null,
          lockedBy: null,
          lockedAt: null
        })
      )
    return Either.right([replayed.length, replayed.reduce(withEvent, tables)] as const)
  })

  const newestFirst = (a: OutboxEvent, b: OutboxEvent) =>
    b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)

  const listByStatus = (
    status: OutboxStatus,
    page: { readonly after?: OutboxListCursor | undefined; readonly limit: number }
  ) =>
    db.read((tables) =>
      Array.from(HashMap.values(tables.outboxEvent))
        .filter((event) => event.status === status && (page.after === undefined || isBeforeCursor(event, page.after)))
        .sort(newestFirst)
        .slice(0, page.limit)
    )

  const oldestPendingAgeMs = oldestAgeMs(["pending"])

  return OutboxRepository.of({
    createInTransaction,
    createManyInTransaction,
    findById,
    findByAggregate,
    claimBatch,
    markPublishedMany,
    markPublishedDirect,
    markDispatchFailed,
    settleDelivery,
    releaseClaimsOf,
    releaseExpiredLocks,
    countByStatus,
    backlogOf,
    replayDead,
    replayAllDead,
    listByStatus,
    oldestPendingAgeMs
  })
})

export const MemoryOutboxRepository = Layer.effect(OutboxRepository, makeMemoryOutboxRepository)
