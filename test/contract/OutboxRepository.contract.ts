import { describe, expect, layer } from "@effect/vitest"
import { Duration, Effect, Either, Option, Tracer } from "effect"
import { newId } from "../../src/domain/Ids.js"
import { PersistenceError } from "../../src/domain/PersistenceError.js"
import { AiJobService } from "../../src/services/AiJobService.js"
import { OutboxRepository } from "../../src/services/outbox/OutboxRepository.js"
import { UnitOfWork } from "../../src/services/UnitOfWork.js"
import type { RepositoryHarness } from "./AiJobLifecycleRepository.contract.js"

const newEvent = (eventType = "ai.job.enqueue") =>
  Effect.map(newId, (id) => ({
    id,
    eventType,
    aggregateType: "AiJob",
    aggregateId: id,
    dedupeKey: `contract:${id}`,
    payload: { jobId: id, jobType: "synthetic_echo", queueName: "ai-interactive", priority: 50 },
    delay: Duration.zero
  }))

/** A job's terminal event, as the lifecycle repository writes it (docs/architecture.md §6.8). */
const newNotifyEvent = Effect.map(newId, (id) => ({
  id,
  eventType: "ai.job.succeeded",
  aggregateType: "AiJob",
  aggregateId: id,
  dedupeKey: `contract-notify:${id}`,
  payload: { type: "ai.job.succeeded", timestamp: "2026-01-01T00:00:00.000Z", data: { jobId: id } },
  delay: Duration.zero,
  lane: "notify" as const
}))

/** As `drain`, for the notify lane. */
const drainNotify = (dispatcherId: string) =>
  Effect.flatMap(OutboxRepository, (outbox) =>
    outbox.claimBatch(dispatcherId, 10_000, "notify").pipe(
      Effect.flatMap((events) => outbox.markPublishedMany(events.map((event) => event.id), dispatcherId))
    ))

/**
 * Outbox events are global (a claim takes any dispatchable event), so each test first drains
 * what earlier tests left pending, then works on its own events.
 */
const drain = (dispatcherId: string) =>
  Effect.flatMap(OutboxRepository, (outbox) =>
    outbox.claimBatch(dispatcherId, 10_000).pipe(
      Effect.flatMap((events) => outbox.markPublishedMany(events.map((event) => event.id), dispatcherId))
    ))

export const outboxRepositoryContract = (harness: RepositoryHarness) =>
  describe(`OutboxRepository contract (${harness.name})`, () => {
    layer(harness.layer, { timeout: 60_000, excludeTestServices: harness.liveClock })((it) => {
      it.effect("a duplicate dedupe key is an idempotent success", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          const event = yield* newEvent()
          const first = yield* outbox.createInTransaction(event)
          const second = yield* outbox.createInTransaction({ ...event, id: yield* newId })
          expect(first).toStrictEqual({ eventId: event.id, duplicate: false })
          expect(second).toStrictEqual({ eventId: event.id, duplicate: true })
        }))

      it.effect("an event written in a rolled-back transaction is never claimed", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          const unitOfWork = yield* UnitOfWork
          yield* drain("d-rollback")
          const event = yield* newEvent()
          const result = yield* Effect.either(
            unitOfWork.transaction(
              outbox.createInTransaction(event).pipe(
                Effect.zipRight(Effect.fail(new PersistenceError({ operation: "test", message: "roll back" })))
              )
            )
          )
          expect(Either.isLeft(result)).toBe(true)
          expect(Option.isNone(yield* outbox.findById(event.id))).toBe(true)
          expect(yield* outbox.claimBatch("d-rollback", 100)).toHaveLength(0)
        }))

      it.effect("markPublishedDirect publishes pending events in one write and leaves a claimed one to its dispatcher", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          yield* drain("d-direct")
          const events = yield* Effect.forEach([0, 1, 2], () => newEvent())
          yield* Effect.forEach(events, outbox.createInTransaction)
          const claimed = yield* outbox.claimBatch("d-direct", 1)
          expect(claimed).toHaveLength(1)
          const changed = yield* outbox.markPublishedDirect(events.map((event) => event.id))
          expect(changed).toBe(2)
          for (const event of events) {
            const row = Option.getOrThrow(yield* outbox.findById(event.id))
            const isClaimed = event.id === claimed[0]!.id
            expect(row.status).toBe(isClaimed ? "processing" : "published")
            expect(row.publishedAt === null).toBe(isClaimed)
          }
          expect(yield* outbox.markPublishedDirect([])).toBe(0)
          // The store is shared by the suite: the claimed event is finished by its dispatcher.
          expect(yield* outbox.markPublishedMany([claimed[0]!.id], "d-direct")).toBe(1)
        }))

      it.effect("a claimed event carries the trace context stored with its job; the backlog age counts unpublished events", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          const service = yield* AiJobService
          yield* drain("d-trace")
          const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
          const { job } = yield* service.createJob({
            userId: `user-${yield* newId}`,
            jobType: "synthetic_echo",
            targetType: "test",
            targetId: "trace",
            input: { message: "hello" }
          }).pipe(Effect.withParentSpan(Tracer.externalSpan({ traceId, spanId: "00f067aa0ba902b7", sampled: true })))
          expect(job.traceParent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`))
          yield* harness.advance(50)
          expect((yield* outbox.backlogOf("enqueue")).oldestUnpublishedAgeMs).toBeGreaterThanOrEqual(50)
          const claimed = yield* outbox.claimBatch("d-trace", 100)
          const mine = claimed.find((event) => event.aggregateId === job.id)
          expect(mine?.traceParent).toBe(job.traceParent)
          // Not a column of the outbox: a plain read has none.
          expect(Option.getOrThrow(yield* outbox.findById(mine?.id ?? "")).traceParent).toBeNull()
          yield* outbox.markPublishedMany(claimed.map((event) => event.id), "d-trace")
        }))

      it.effect("claims, publishes, and never hands one event to two dispatchers", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          yield* drain("d-0")
          const events = yield* Effect.forEach(Array.from({ length: 30 }, () => 0), () => newEvent())
          yield* Effect.forEach(events, outbox.createInTransaction)
          // Three dispatchers claim in rounds until nothing is left. With few rows MySQL may scan
          // the whole table and lock every row, so one claim can take all while the others skip:
          // exclusivity is the property, not an even share.
          const claimUntilEmpty = (dispatcherId: string) =>
            Effect.gen(function*() {
              const mine: Array<{ readonly id: string; readonly status: string; readonly lockedBy: string | null }> = []
              while (true) {
                const claimed = yield* outbox.claimBatch(dispatcherId, 12)
                if (claimed.length === 0) return { dispatcherId, claimed: mine }
                mine.push(...claimed)
              }
            })
          const claims = yield* Effect.forEach(["d-1", "d-2", "d-3"], claimUntilEmpty, { concurrency: "unbounded" })
          const claimedIds = claims.flatMap(({ claimed }) => claimed.map((event) => event.id))
          expect(new Set(claimedIds).size).toBe(claimedIds.length)
          expect(new Set(claimedIds)).toStrictEqual(new Set(events.map((event) => event.id)))
          for (const { claimed, dispatcherId } of claims) {
            for (const event of claimed) {
              expect(event.status).toBe("processing")
              expect(event.lockedBy).toBe(dispatcherId)
              // Only the holder of the claim may publish it.
              expect(yield* outbox.markPublishedMany([event.id], "someone-else")).toBe(0)
              expect(yield* outbox.markPublishedMany([event.id], dispatcherId)).toBe(1)
            }
          }
          const published = yield* outbox.findById(events[0]!.id)
          expect(Option.getOrThrow(published).status).toBe("published")
          expect(Option.getOrThrow(published).publishedAt).not.toBeNull()
        }))

      it.effect("a failed dispatch backs off, and the third failure makes the event dead; replay revives it", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          yield* drain("d-fail")
          const event = yield* newEvent()
          yield* outbox.createInTransaction(event)
          const before = yield* outbox.countByStatus
          const retryDelayMs = harness.lockTtlMs
          for (let attempt = 1; attempt <= 3; attempt++) {
            const [claimed] = yield* outbox.claimBatch("d-fail", 10)
            expect(claimed?.id).toBe(event.id)
            const outcome = yield* outbox.markDispatchFailed(event.id, "d-fail", `redis down #${attempt}`, {
              retryDelay: Duration.millis(retryDelayMs),
              maxAttempts: 3
            })
            expect(Option.getOrThrow(outcome)).toBe(attempt < 3 ? "retry_scheduled" : "dead")
            if (attempt < 3) {
              // Not before its backoff.
              expect(yield* outbox.claimBatch("d-fail", 10)).toHaveLength(0)
              yield* harness.advance(retryDelayMs * 2)
            }
          }
          const dead = Option.getOrThrow(yield* outbox.findById(event.id))
          expect(dead.status).toBe("dead")
          expect(dead.attemptCount).toBe(3)
          expect(dead.lastError).toBe("redis down #3")
          const after = yield* outbox.countByStatus
          expect(after.dead).toBe(before.dead + 1)
          expect(yield* outbox.claimBatch("d-fail", 10)).toHaveLength(0)

          const notDead = yield* Effect.either(outbox.replayDead((yield* newEvent()).id))
          expect(Either.isLeft(notDead) && notDead.left._tag).toBe("OutboxEventNotFound")
          const replayed = yield* outbox.replayDead(event.id)
          expect(replayed.status).toBe("pending")
          expect(replayed.attemptCount).toBe(0)
          const again = yield* Effect.either(outbox.replayDead(event.id))
          expect(Either.isLeft(again) && again.left._tag).toBe("OutboxEventNotDead")
          const [reclaimed] = yield* outbox.claimBatch("d-fail", 10)
          expect(reclaimed?.id).toBe(event.id)
          expect(yield* outbox.markPublishedMany([event.id], "d-fail")).toBe(1)
        }))

      it.effect("each lane claims only its own events", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          yield* drain("d-lanes")
          yield* drainNotify("d-lanes")
          const enqueue = yield* newEvent()
          const notify = yield* newNotifyEvent
          yield* outbox.createInTransaction(enqueue)
          yield* outbox.createInTransaction(notify)
          expect(Option.getOrThrow(yield* outbox.findById(notify.id)).lane).toBe("notify")
          const enqueued = yield* outbox.claimBatch("d-lanes", 100)
          expect(enqueued.map((event) => [event.id, event.lane])).toEqual([[enqueue.id, "enqueue"]])
          const notified = yield* outbox.claimBatch("d-lanes", 100, "notify")
          expect(notified.map((event) => [event.id, event.lane])).toEqual([[notify.id, "notify"]])
          expect(yield* outbox.markPublishedMany([enqueue.id, notify.id], "d-lanes")).toBe(2)
          expect((yield* outbox.findByAggregate(notify.aggregateId)).map((event) => event.id)).toEqual([notify.id])
        }))

      it.effect("each lane's backlog counts only its own events: unpublished (claimed too), dead, and its oldest one's age", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          // Earlier cases may leave dead events: revived and published, both lanes start empty.
          yield* outbox.replayAllDead
          yield* drain("d-backlog")
          yield* drainNotify("d-backlog")
          const empty = { unpublished: 0, dead: 0, oldestUnpublishedAgeMs: 0 }
          expect(yield* outbox.backlogOf("enqueue")).toStrictEqual(empty)
          expect(yield* outbox.backlogOf("notify")).toStrictEqual(empty)

          const enqueue = yield* newEvent()
          yield* outbox.createInTransaction(enqueue)
          yield* harness.advance(500)
          const delivered = yield* newNotifyEvent
          const givenUp = yield* newNotifyEvent
          yield* outbox.createInTransaction(delivered)
          yield* outbox.createInTransaction(givenUp)
          yield* harness.advance(20)
          const jobs = yield* outbox.backlogOf("enqueue")
          const events = yield* outbox.backlogOf("notify")
          expect([jobs.unpublished, jobs.dead, events.unpublished, events.dead]).toStrictEqual([1, 0, 2, 0])
          // Each lane's age is its own oldest event's: the enqueue event is 500 ms older.
          expect(jobs.oldestUnpublishedAgeMs).toBeGreaterThanOrEqual(520)
          expect(events.oldestUnpublishedAgeMs).toBeGreaterThanOrEqual(20)
          expect(events.oldestUnpublishedAgeMs).toBeLessThan(jobs.oldestUnpublishedAgeMs - 400)

          // Claimed, still unpublished; given up, dead; delivered, out of the backlog.
          const claimed = yield* outbox.claimBatch("d-backlog", 10, "notify")
          expect(claimed.map((event) => event.id).sort()).toStrictEqual([delivered.id, givenUp.id].sort())
          expect((yield* outbox.backlogOf("notify")).unpublished).toBe(2)
          yield* outbox.settleDelivery(givenUp.id, "d-backlog", {
            _tag: "GiveUp",
            deliveredTo: [],
            error: "webhook answered 500"
          })
          expect(yield* outbox.backlogOf("notify")).toMatchObject({ unpublished: 1, dead: 1 })
          yield* outbox.settleDelivery(delivered.id, "d-backlog", { _tag: "Delivered", deliveredTo: ["a"] })
          expect(yield* outbox.backlogOf("notify")).toStrictEqual({
            unpublished: 0,
            dead: 1,
            oldestUnpublishedAgeMs: 0
          })
          // The enqueue lane saw none of it: its event waits until it fails for good.
          expect(yield* outbox.backlogOf("enqueue")).toMatchObject({ unpublished: 1, dead: 0 })
          expect((yield* outbox.claimBatch("d-backlog", 10)).map((event) => event.id)).toStrictEqual([enqueue.id])
          expect((yield* outbox.backlogOf("enqueue")).unpublished).toBe(1)
          yield* outbox.markDispatchFailed(enqueue.id, "d-backlog", "queue refused", {
            retryDelay: Duration.millis(0),
            maxAttempts: 1
          })
          expect(yield* outbox.backlogOf("enqueue")).toStrictEqual({
            unpublished: 0,
            dead: 1,
            oldestUnpublishedAgeMs: 0
          })
          expect(yield* outbox.backlogOf("notify")).toStrictEqual({
            unpublished: 0,
            dead: 1,
            oldestUnpublishedAgeMs: 0
          })

          expect(yield* outbox.replayAllDead).toBe(2)
          yield* drain("d-backlog")
          yield* drainNotify("d-backlog")
        }))

      it.effect("a delivery round records its acknowledged targets: retried after its delay, dead when given up, replayed to the rest", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          yield* drainNotify("d-settle")
          const event = yield* newNotifyEvent
          yield* outbox.createInTransaction(event)
          const retryDelayMs = harness.lockTtlMs
          expect((yield* outbox.claimBatch("d-settle", 10, "notify")).map((claimed) => claimed.id)).toEqual([event.id])
          // Only the claim's holder settles it.
          expect(
            yield* outbox.settleDelivery(event.id, "someone-else", { _tag: "Delivered", deliveredTo: ["a", "b"] })
          ).toStrictEqual(Option.none())
          const retry = yield* outbox.settleDelivery(event.id, "d-settle", {
            _tag: "RetryLater",
            deliveredTo: ["a"],
            error: "webhook b answered 500",
            retryDelay: Duration.millis(retryDelayMs)
          })
          expect(Option.getOrThrow(retry)).toBe("retry_scheduled")
          const pending = Option.getOrThrow(yield* outbox.findById(event.id))
          expect(pending).toMatchObject({
            status: "pending",
            attemptCount: 1,
            deliveredTo: ["a"],
            lastError: "webhook b answered 500",
            lockedBy: null
          })
          expect(yield* outbox.claimBatch("d-settle", 10, "notify")).toHaveLength(0)
          yield* harness.advance(retryDelayMs * 2)
          expect((yield* outbox.claimBatch("d-settle", 10, "notify")).map((claimed) => claimed.deliveredTo)).toEqual([[
            "a"
          ]])
          const dead = yield* outbox.settleDelivery(event.id, "d-settle", {
            _tag: "GiveUp",
            deliveredTo: ["a"],
            error: "webhook b: timed out"
          })
          expect(Option.getOrThrow(dead)).toBe("dead")
          expect(Option.getOrThrow(yield* outbox.findById(event.id))).toMatchObject({
            status: "dead",
            attemptCount: 2,
            deliveredTo: ["a"]
          })
          expect(yield* outbox.claimBatch("d-settle", 10, "notify")).toHaveLength(0)
          // A replay keeps what was acknowledged: the next round goes to the others only.
          yield* outbox.replayDead(event.id)
          const [replayed] = yield* outbox.claimBatch("d-settle", 10, "notify")
          expect(replayed).toMatchObject({ id: event.id, attemptCount: 0, deliveredTo: ["a"] })
          const delivered = yield* outbox.settleDelivery(event.id, "d-settle", {
            _tag: "Delivered",
            deliveredTo: ["a", "b"]
          })
          expect(Option.getOrThrow(delivered)).toBe("published")
          const published = Option.getOrThrow(yield* outbox.findById(event.id))
          expect(published).toMatchObject({ status: "published", deliveredTo: ["a", "b"] })
          expect(published.publishedAt).not.toBeNull()
          expect(yield* outbox.settleDelivery(event.id, "d-settle", { _tag: "GiveUp", deliveredTo: [], error: "late" }))
            .toStrictEqual(
              Option.none()
            )
        }))

      it.effect("a claim older than the lock TTL goes back to pending", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          yield* drain("d-dead")
          const event = yield* newEvent()
          yield* outbox.createInTransaction(event)
          const [claimed] = yield* outbox.claimBatch("d-dead", 10)
          expect(claimed?.id).toBe(event.id)
          expect(yield* outbox.releaseExpiredLocks(Duration.millis(harness.lockTtlMs))).toBe(0)
          yield* harness.advance(harness.lockTtlMs * 2)
          expect(yield* outbox.releaseExpiredLocks(Duration.millis(harness.lockTtlMs))).toBe(1)
          // The crashed dispatcher's late publish is refused; another dispatcher takes it.
          expect(yield* outbox.markPublishedMany([event.id], "d-dead")).toBe(0)
          const [again] = yield* outbox.claimBatch("d-alive", 10)
          expect(again?.id).toBe(event.id)
          expect(yield* outbox.markPublishedMany([event.id], "d-alive")).toBe(1)
        }))

      it.effect("dead events are listed newest first in pages with their last error; replaying all of them counts them", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          yield* outbox.replayAllDead
          yield* drain("d-list")
          const first = yield* newEvent()
          const second = yield* newEvent()
          yield* outbox.createInTransaction(first)
          yield* outbox.createInTransaction(second)
          const claimed = yield* outbox.claimBatch("d-list", 10)
          expect(claimed.map((event) => event.id).sort()).toStrictEqual([first.id, second.id].sort())
          expect((yield* outbox.listByStatus("processing", { limit: 10 })).map((event) => event.id).sort())
            .toStrictEqual(
              [first.id, second.id].sort()
            )
          for (const event of claimed) {
            yield* outbox.markDispatchFailed(event.id, "d-list", `queue refused ${event.id}`, {
              retryDelay: Duration.millis(0),
              maxAttempts: 1
            })
          }
          const page1 = yield* outbox.listByStatus("dead", { limit: 1 })
          expect(page1).toHaveLength(1)
          const page2 = yield* outbox.listByStatus("dead", { limit: 10, after: page1[0] })
          const listed = [...page1, ...page2]
          expect(listed.map((event) => event.id).sort()).toStrictEqual([first.id, second.id].sort())
          for (const event of listed) {
            expect(event.lastError).toBe(`queue refused ${event.id}`)
            expect(event.attemptCount).toBe(1)
          }
          expect(yield* outbox.listByStatus("pending", { limit: 10 })).toHaveLength(0)
          expect(Option.isNone(yield* outbox.oldestPendingAgeMs)).toBe(true)

          expect(yield* outbox.replayAllDead).toBe(2)
          expect(yield* outbox.listByStatus("dead", { limit: 10 })).toHaveLength(0)
          expect((yield* outbox.countByStatus).dead).toBe(0)
          expect((yield* outbox.listByStatus("pending", { limit: 10 })).map((event) => event.id).sort()).toStrictEqual(
            [first.id, second.id].sort()
          )
          const age = yield* outbox.oldestPendingAgeMs
          expect(Option.isSome(age) && age.value >= 0 && age.value < 60_000).toBe(true)
          expect(yield* outbox.replayAllDead).toBe(0)
          yield* drain("d-list")
        }))

      // Each of these cases builds every row it asserts on: a mutation run may run it alone.
      it.effect("claims the earliest available event first, equal times by id, and no more than the limit", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          yield* drain("d-order")
          const ids = (yield* Effect.forEach([0, 1, 2, 3], () => newId)).sort()
          // The smallest id becomes available last: only its time can put it behind the others. Its
          // delay outlasts the three inserts after it even on a loaded machine.
          const late = { ...(yield* newEvent()), id: ids[0]!, delay: Duration.millis(500) }
          yield* outbox.createInTransaction(late)
          for (const id of [ids[3]!, ids[2]!, ids[1]!]) {
            yield* outbox.createInTransaction({ ...(yield* newEvent()), id })
          }
          yield* harness.advance(600)
          const first = yield* outbox.claimBatch("d-order", 2)
          expect(first).toHaveLength(2)
          const rest = yield* outbox.claimBatch("d-order", 10)
          const rows = yield* Effect.forEach(ids, (id) => Effect.map(outbox.findById(id), Option.getOrThrow))
          const dispatchOrder = [...rows].sort((a, b) =>
            a.availableAt.getTime() - b.availableAt.getTime() || (a.id < b.id ? -1 : 1)
          )
          expect([...first, ...rest].map((event) => event.id)).toStrictEqual(dispatchOrder.map((event) => event.id))
          expect(dispatchOrder.at(-1)?.id).toBe(late.id)
          expect(yield* outbox.markPublishedMany(ids, "d-order")).toBe(4)
        }))

      it.effect("lists newest first, equal times by id from the highest, page after page", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          yield* drain("d-pages")
          const ids = (yield* Effect.forEach([0, 1, 2, 3], () => newId)).sort()
          // The highest id is the oldest row: only its time can put it last.
          yield* outbox.createInTransaction({ ...(yield* newEvent()), id: ids[3]! })
          yield* harness.advance(10)
          for (const id of [ids[1]!, ids[0]!, ids[2]!]) {
            yield* outbox.createInTransaction({ ...(yield* newEvent()), id })
          }
          const all = yield* outbox.listByStatus("pending", { limit: 10 })
          const newestFirst = [...all].sort((a, b) =>
            b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1)
          )
          expect(all.map((event) => event.id)).toStrictEqual(newestFirst.map((event) => event.id))
          expect(new Set(all.map((event) => event.id))).toStrictEqual(new Set(ids))
          expect(all.at(-1)?.id).toBe(ids[3])
          const page1 = yield* outbox.listByStatus("pending", { limit: 2 })
          const page2 = yield* outbox.listByStatus("pending", { limit: 10, after: page1[1]! })
          expect([...page1, ...page2].map((event) => event.id)).toStrictEqual(all.map((event) => event.id))
          yield* drain("d-pages")
        }))

      it.effect("the backlog ages: the oldest pending event, then the oldest unpublished one, then none", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          yield* drain("d-ages")
          expect(Option.isNone(yield* outbox.oldestPendingAgeMs)).toBe(true)
          expect((yield* outbox.backlogOf("enqueue")).oldestUnpublishedAgeMs).toBe(0)
          const older = yield* newEvent()
          yield* outbox.createInTransaction(older)
          yield* harness.advance(30)
          yield* outbox.createInTransaction(yield* newEvent())
          yield* harness.advance(20)
          const within = (age: number) => age >= 50 && age < 1_050
          const pendingAge = Option.getOrThrow(yield* outbox.oldestPendingAgeMs)
          expect(within(pendingAge)).toBe(true)
          expect(within((yield* outbox.backlogOf("enqueue")).oldestUnpublishedAgeMs)).toBe(true)
          // Claimed, they are no longer pending but still unpublished.
          const claimed = yield* outbox.claimBatch("d-ages", 10)
          expect(claimed).toHaveLength(2)
          expect(Option.isNone(yield* outbox.oldestPendingAgeMs)).toBe(true)
          expect(within((yield* outbox.backlogOf("enqueue")).oldestUnpublishedAgeMs)).toBe(true)
          // A dead event is neither.
          yield* outbox.markDispatchFailed(older.id, "d-ages", "refused", {
            retryDelay: Duration.millis(0),
            maxAttempts: 1
          })
          expect(yield* outbox.markPublishedMany(claimed.map((event) => event.id), "d-ages")).toBe(1)
          expect(Option.isNone(yield* outbox.oldestPendingAgeMs)).toBe(true)
          expect((yield* outbox.backlogOf("enqueue")).oldestUnpublishedAgeMs).toBe(0)
          yield* outbox.replayAllDead
          yield* drain("d-ages")
        }))

      it.effect("a published event stays published: its dispatcher can neither publish, fail nor release it again", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          yield* drain("d-once")
          const event = yield* newEvent()
          yield* outbox.createInTransaction(event)
          expect((yield* outbox.claimBatch("d-once", 10)).map((row) => row.id)).toStrictEqual([event.id])
          expect(yield* outbox.markPublishedMany([event.id], "d-once")).toBe(1)
          const published = Option.getOrThrow(yield* outbox.findById(event.id))
          expect(yield* outbox.markPublishedMany([event.id], "d-once")).toBe(0)
          expect(yield* outbox.markPublishedDirect([event.id])).toBe(0)
          const options = { retryDelay: Duration.millis(0), maxAttempts: 3 }
          expect(yield* outbox.markDispatchFailed(event.id, "d-once", "late failure", options)).toStrictEqual(
            Option.none()
          )
          expect(yield* outbox.releaseClaimsOf("d-once")).toBe(0)
          yield* harness.advance(harness.lockTtlMs * 2)
          expect(yield* outbox.releaseExpiredLocks(Duration.millis(harness.lockTtlMs))).toBe(0)
          expect(Option.getOrThrow(yield* outbox.findById(event.id))).toStrictEqual(published)
          expect(yield* outbox.claimBatch("d-once", 10)).toHaveLength(0)
        }))

      it.effect("an event failed for the last time keeps its time and is never claimed, released or published", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          yield* drain("d-last")
          const event = yield* newEvent()
          yield* outbox.createInTransaction(event)
          const [claimed] = yield* outbox.claimBatch("d-last", 10)
          expect(claimed?.id).toBe(event.id)
          const outcome = yield* outbox.markDispatchFailed(event.id, "d-last", "refused", {
            retryDelay: Duration.millis(60_000),
            maxAttempts: 1
          })
          expect(outcome).toStrictEqual(Option.some("dead"))
          const dead = Option.getOrThrow(yield* outbox.findById(event.id))
          expect([dead.status, dead.lockedBy, dead.lockedAt, dead.attemptCount]).toStrictEqual(["dead", null, null, 1])
          expect(dead.availableAt).toStrictEqual(claimed?.availableAt)
          expect(yield* outbox.markPublishedMany([event.id], "d-last")).toBe(0)
          expect(yield* outbox.markPublishedDirect([event.id])).toBe(0)
          expect(yield* outbox.releaseClaimsOf("d-last")).toBe(0)
          yield* harness.advance(harness.lockTtlMs * 2)
          expect(yield* outbox.releaseExpiredLocks(Duration.millis(harness.lockTtlMs))).toBe(0)
          expect(yield* outbox.claimBatch("d-last", 10)).toHaveLength(0)
          expect(Option.getOrThrow(yield* outbox.findById(event.id)).status).toBe("dead")
          // Replayed, it is available at once, without its error.
          const replayed = yield* outbox.replayDead(event.id)
          expect([replayed.status, replayed.attemptCount, replayed.lastError, replayed.lockedBy]).toStrictEqual([
            "pending",
            0,
            null,
            null
          ])
          expect((yield* outbox.claimBatch("d-last", 10)).map((row) => row.id)).toStrictEqual([event.id])
          expect(yield* outbox.markPublishedMany([event.id], "d-last")).toBe(1)
        }))

      it.effect("a stopping dispatcher gives back its own claims at once, and only its own", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          yield* drain("d-stopping")
          const mine = yield* newEvent()
          yield* outbox.createInTransaction(mine)
          expect((yield* outbox.claimBatch("d-stopping", 10)).map((event) => event.id)).toStrictEqual([mine.id])
          const theirs = yield* newEvent()
          yield* outbox.createInTransaction(theirs)
          expect((yield* outbox.claimBatch("d-running", 10)).map((event) => event.id)).toStrictEqual([theirs.id])
          expect(yield* outbox.releaseClaimsOf("d-stopping")).toBe(1)
          expect(yield* outbox.releaseClaimsOf("d-stopping")).toBe(0)
          // Pending again, without waiting for the claim TTL; the other claim still holds.
          expect((yield* outbox.claimBatch("d-next", 10)).map((event) => event.id)).toStrictEqual([mine.id])
          expect(yield* outbox.markPublishedMany([theirs.id], "d-running")).toBe(1)
        }))
    })
  })
