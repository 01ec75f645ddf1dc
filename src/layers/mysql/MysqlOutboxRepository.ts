import { SqlClient, SqlSchema } from "@effect/sql"
import type { Fragment } from "@effect/sql/Statement"
import { Duration, Effect, Layer, Option, Schema } from "effect"
import type { NewOutboxEvent, OutboxBacklog, OutboxLane, OutboxStatus } from "../../domain/OutboxEvent.js"
import {
  type DeliveryOutcome,
  outboxCountsOf,
  OutboxEventNotDead,
  OutboxEventNotFound,
  type OutboxListCursor,
  OutboxRepository,
  pendingEventFields
} from "../../services/outbox/OutboxRepository.js"
import { changedRows, NewOutboxEventRow, OutboxEventRow, Total } from "./rows.js"
import { sqlClock } from "./sqlClock.js"
import { isDuplicateKey, persistence, retryOnLockContention } from "./sqlErrors.js"
import { insertRows, paddedForIn } from "./statementShapes.js"

/** Events by their delay, in order: each group is one INSERT (a create's events share one). */
const groupByDelay = (
  events: ReadonlyArray<NewOutboxEvent>
): ReadonlyArray<readonly [Duration.Duration, ReadonlyArray<NewOutboxEvent>]> => {
  // Keyed by milliseconds: two equal Durations are not the same Map key.
  const groups = new Map<number, readonly [Duration.Duration, Array<NewOutboxEvent>]>()
  for (const event of events) {
    const group = groups.get(Duration.toMillis(event.delay))
    if (group === undefined) groups.set(Duration.toMillis(event.delay), [event.delay, [event]])
    else group[1].push(event)
  }
  return Array.from(groups.values())
}

const EventId = Schema.Struct({ id: Schema.String })
/** A computed number column: mysql2 may hand a BIGINT or DECIMAL over as a string. */
const SqlNumber = Schema.Union(Schema.Number, Schema.NumberFromString)
const OldestAge = Schema.Struct({ ageMs: Schema.NullOr(SqlNumber) })
const StatusTotal = Schema.Struct({ status: Schema.String, ...Total.fields })
const Backlog = Schema.Struct({ unpublished: SqlNumber, dead: SqlNumber, ...OldestAge.fields })

/** `outbox_event` on MySQL; a claim is a compare-and-set on primary keys (see `claimBatch`), times the server's clock. */
export const makeMysqlOutboxRepository = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { now, nowMinus, nowPlus } = sqlClock(sql)

  const findEvent = SqlSchema.findOne({
    Request: Schema.String,
    Result: OutboxEventRow,
    execute: (eventId) => sql`SELECT * FROM outbox_event WHERE id = ${eventId}`
  })
  const insertEvent = SqlSchema.void({
    Request: Schema.Struct({ row: NewOutboxEventRow, delay: Schema.DurationFromSelf }),
    // `sql.insert` binds every value; the clock columns are the database's expressions, so the row
    // goes in as MySQL's `INSERT ... SET` (column names still from the row's keys).
    execute: ({ delay, row }) =>
      sql`INSERT INTO outbox_event SET ${sql.update(row)}, available_at = ${nowPlus(delay)},
            created_at = ${now}, updated_at = ${now}`
  })
  // A locking read sees the winner's committed row; a plain one may read an older snapshot.
  const findIdByDedupeKey = SqlSchema.findOne({
    Request: Schema.String,
    Result: EventId,
    execute: (dedupeKey) => sql`SELECT id FROM outbox_event WHERE dedupe_key = ${dedupeKey} LOCK IN SHARE MODE`
  })
  const findDispatchable = SqlSchema.findAll({
    Request: Schema.Struct({ lane: Schema.String, limit: Schema.Number }),
    Result: EventId,
    // The index on (lane, status, available_at) keeps each lane's claim to its own rows.
    execute: ({ lane, limit }) =>
      sql`SELECT id FROM outbox_event
          WHERE lane = ${lane} AND status = 'pending' AND available_at <= ${now}
          ORDER BY available_at, id
          LIMIT ${limit}`
  })
  const findEventsOf = SqlSchema.findAll({
    Request: Schema.String,
    Result: OutboxEventRow,
    execute: (aggregateId) =>
      sql`SELECT * FROM outbox_event WHERE aggregate_id = ${aggregateId} ORDER BY created_at, id`
  })
  const findClaimed = SqlSchema.findAll({
    Request: Schema.Struct({ ids: Schema.Array(Schema.String), dispatcherId: Schema.String }),
    Result: OutboxEventRow,
    execute: ({ dispatcherId, ids }) =>
      // The job's trace context comes along, so the publish span joins the job's trace.
      sql`SELECT o.*, j.trace_parent FROM outbox_event o
          LEFT JOIN ai_job j ON o.aggregate_type = 'AiJob' AND j.id = o.aggregate_id
          WHERE o.id IN ${sql.in(paddedForIn(ids))} AND o.status = 'processing' AND o.locked_by = ${dispatcherId}
          ORDER BY o.available_at, o.id`
  })
  /** By the database clock, as every outbox time; the index on (status, available_at) keeps it to unpublished rows. */
  const findOldestAge = SqlSchema.findOne({
    Request: Schema.Array(Schema.String),
    Result: OldestAge,
    execute: (statuses) =>
      sql`SELECT TIMESTAMPDIFF(MICROSECOND, MIN(created_at), ${now}) DIV 1000 AS age_ms
          FROM outbox_event WHERE ${sql.in("status", statuses)}`
  })
  const oldestAgeMs = (operation: string, statuses: ReadonlyArray<OutboxStatus>) =>
    findOldestAge(statuses).pipe(
      persistence(operation),
      Effect.map(Option.flatMap(({ ageMs }) => (ageMs === null ? Option.none() : Option.some(Math.max(0, ageMs)))))
    )
  // A range of the index on (lane, status, available_at): the scrape reads the backlog's rows,
  // never the published history.
  const findBacklog = SqlSchema.findOne({
    Request: Schema.String,
    Result: Backlog,
    execute: (lane) =>
      sql`SELECT COUNT(CASE WHEN status <> 'dead' THEN 1 END) AS unpublished,
                 COUNT(CASE WHEN status = 'dead' THEN 1 END) AS dead,
                 TIMESTAMPDIFF(MICROSECOND, MIN(CASE WHEN status <> 'dead' THEN created_at END), ${now}) DIV 1000 AS age_ms
          FROM outbox_event WHERE lane = ${lane} AND status IN ('pending', 'processing', 'dead')`
  })
  const totalsByStatus = SqlSchema.findAll({
    Request: Schema.Void,
    Result: StatusTotal,
    execute: () => sql`SELECT status, COUNT(*) AS total FROM outbox_event GROUP BY status`
  })

  const findById = (eventId: string) => findEvent(eventId).pipe(persistence("outbox_event.findById"))

  const findByAggregate = (aggregateId: string) =>
    findEventsOf(aggregateId).pipe(persistence("outbox_event.findByAggregate"))

  const createInTransaction = (event: NewOutboxEvent) =>
    insertEvent({ row: pendingEventFields(event), delay: event.delay }).pipe(
      Effect.as({ eventId: event.id, duplicate: false }),
      // The unique dedupe key refused the row (the outbox's idempotency); MySQL keeps the transaction alive.
      Effect.catchIf(isDuplicateKey, () =>
        findIdByDedupeKey(event.dedupeKey).pipe(
          Effect.map((row) => ({
            eventId: Option.match(row, { onNone: () => event.id, onSome: (found) => found.id }),
            duplicate: true
          }))
        )),
      persistence("outbox_event.create")
    )

  // The events of one create share their delay, so `available_at` is one expression for every row.
  const insertEvents = SqlSchema.void({
    Request: Schema.Struct({ rows: Schema.Array(NewOutboxEventRow), delay: Schema.DurationFromSelf }),
    execute: ({ delay, rows }) =>
      insertRows(sql, "outbox_event", rows, [["available_at", nowPlus(delay)], ["created_at", now], [
        "updated_at",
        now
      ]])
  })

  const createManyInTransaction = (events: ReadonlyArray<NewOutboxEvent>) =>
    Effect.forEach(
      groupByDelay(events),
      ([delay, group]) => insertEvents({ rows: group.map(pendingEventFields), delay }),
      { discard: true }
    ).pipe(
      persistence("outbox_event.createMany")
    )

  /**
   * A claim is a compare-and-set on primary keys: read the oldest dispatchable ids (a plain,
   * non-locking read), then `pending → processing` on exactly those rows in one UPDATE, and read
   * back the rows this dispatcher won. No range is ever locked, so claims never deadlock with the
   * inserts of concurrent job creations (a `FOR UPDATE SKIP LOCKED` range claim under REPEATABLE
   * READ does); a row another dispatcher took in between simply is not won.
   */
  const claimBatch = (dispatcherId: string, limit: number, lane: OutboxLane = "enqueue") =>
    Effect.gen(function*() {
      const candidates = yield* findDispatchable({ lane, limit })
      if (candidates.length === 0) return []
      const ids = candidates.map((row) => row.id)
      yield* sql`UPDATE outbox_event SET status = 'processing', locked_by = ${dispatcherId}, locked_at = ${now},
                   updated_at = ${now}
                 WHERE id IN ${sql.in(paddedForIn(ids))} AND status = 'pending'`.pipe(retryOnLockContention)
      return ids
    }).pipe(
      Effect.flatMap((ids) => ids.length === 0 ? Effect.succeed([]) : findClaimed({ ids, dispatcherId })),
      persistence("outbox_event.claimBatch")
    )

  const markPublishedMany = (eventIds: ReadonlyArray<string>, dispatcherId: string) =>
    eventIds.length === 0
      ? Effect.succeed(0)
      : changedRows(
        sql`UPDATE outbox_event SET status = 'published', published_at = ${now}, updated_at = ${now}
            WHERE id IN ${sql.in(paddedForIn(eventIds))} AND status = 'processing' AND locked_by = ${dispatcherId}`.raw
      ).pipe(persistence("outbox_event.markPublishedMany"))

  const markPublishedDirect = (eventIds: ReadonlyArray<string>) =>
    eventIds.length === 0
      ? Effect.succeed(0)
      : changedRows(
        sql`UPDATE outbox_event SET status = 'published', published_at = ${now}, updated_at = ${now}
            WHERE id IN ${sql.in(paddedForIn(eventIds))} AND status = 'pending'`.raw
      ).pipe(persistence("outbox_event.markPublishedDirect"))

  const markDispatchFailed: OutboxRepository["Type"]["markDispatchFailed"] = (eventId, dispatcherId, error, options) =>
    Effect.gen(function*() {
      // Assignments read the old attempt_count: the increment comes last (MySQL evaluates SET
      // left to right; MariaDB's SIMULTANEOUS_ASSIGNMENT mode agrees with this order too).
      const changed = yield* changedRows(
        sql`UPDATE outbox_event SET
              status = IF(attempt_count + 1 >= ${options.maxAttempts}, 'dead', 'pending'),
              available_at = IF(attempt_count + 1 >= ${options.maxAttempts}, available_at, ${
          nowPlus(options.retryDelay)
        }),
              last_error = ${error.slice(0, 2000)}, locked_by = NULL, locked_at = NULL, updated_at = ${now},
              attempt_count = attempt_count + 1
            WHERE id = ${eventId} AND status = 'processing' AND locked_by = ${dispatcherId}`.raw
      ).pipe(persistence("outbox_event.markDispatchFailed"))
      if (changed === 0) return Option.none()
      const event = yield* findById(eventId)
      return Option.map(event, (row) => (row.status === "dead" ? "dead" as const : "retry_scheduled" as const))
    })

  const settleDelivery: OutboxRepository["Type"]["settleDelivery"] = (eventId, dispatcherId, settlement) => {
    const deliveredTo = JSON.stringify(settlement.deliveredTo)
    const [outcome, set]: readonly [DeliveryOutcome, Fragment] = settlement._tag === "Delivered"
      ? ["published", sql`status = 'published', published_at = ${now}`]
      : settlement._tag === "RetryLater"
      ? [
        "retry_scheduled",
        sql`status = 'pending', available_at = ${nowPlus(settlement.retryDelay)},
          last_error = ${
          settlement.error.slice(0, 2000)
        }, attempt_count = attempt_count + 1, locked_by = NULL, locked_at = NULL`
      ]
      : [
        "dead",
        sql`status = 'dead', last_error = ${settlement.error.slice(0, 2000)}, attempt_count = attempt_count + 1,
          locked_by = NULL, locked_at = NULL`
      ]
    return changedRows(
      sql`UPDATE outbox_event SET delivered_to = ${deliveredTo}, updated_at = ${now}, ${set}
          WHERE id = ${eventId} AND status = 'processing' AND locked_by = ${dispatcherId}`.raw
    ).pipe(
      persistence("outbox_event.settleDelivery"),
      Effect.map((changed) => (changed === 0 ? Option.none() : Option.some(outcome)))
    )
  }

  const releaseClaimsOf = (dispatcherId: string) =>
    changedRows(
      sql`UPDATE outbox_event SET status = 'pending', locked_by = NULL, locked_at = NULL, updated_at = ${now}
          WHERE status = 'processing' AND locked_by = ${dispatcherId}`.raw
    ).pipe(persistence("outbox_event.releaseClaimsOf"))

  const releaseExpiredLocks = (lockTtl: Duration.Duration) =>
    changedRows(
      sql`UPDATE outbox_event SET status = 'pending', locked_by = NULL, locked_at = NULL, updated_at = ${now}
          WHERE status = 'processing' AND locked_at < ${nowMinus(lockTtl)}`.raw
    ).pipe(persistence("outbox_event.releaseExpiredLocks"))

  const countByStatus = totalsByStatus(undefined).pipe(
    persistence("outbox_event.countByStatus"),
    Effect.map(outboxCountsOf)
  )

  const backlogOf = (lane: OutboxLane) =>
    findBacklog(lane).pipe(
      persistence("outbox_event.backlogOf"),
      // An aggregate without GROUP BY always answers one row.
      Effect.map(Option.match({
        onNone: (): OutboxBacklog => ({ unpublished: 0, dead: 0, oldestUnpublishedAgeMs: 0 }),
        onSome: ({ ageMs, dead, unpublished }): OutboxBacklog => ({
          unpublished,
          dead,
          oldestUnpublishedAgeMs: Math.max(0, ageMs ?? 0)
        })
      }))
    )

  const replayDead = (eventId: string) =>
    Effect.gen(function*() {
      const changed = yield* changedRows(
        sql`UPDATE outbox_event SET status = 'pending', attempt_count = 0, available_at = ${now}, last_error = NULL,
              locked_by = NULL, locked_at = NULL, updated_at = ${now}
            WHERE id = ${eventId} AND status = 'dead'`.raw
      ).pipe(persistence("outbox_event.replayDead"))
      const event = yield* findById(eventId)
      if (Option.isNone(event)) return yield* Effect.fail(new OutboxEventNotFound({ eventId }))
      if (changed === 0) return yield* Effect.fail(new OutboxEventNotDead({ eventId, status: event.value.status }))
      return event.value
    })

  const replayAllDead = changedRows(
    sql`UPDATE outbox_event SET status = 'pending', attempt_count = 0, available_at = ${now}, last_error = NULL,
          locked_by = NULL, locked_at = NULL, updated_at = ${now}
        WHERE status = 'dead'`.raw
  ).pipe(persistence("outbox_event.replayAllDead"))

  const findPage = SqlSchema.findAll({
    Request: Schema.Struct({
      status: Schema.String,
      after: Schema.optional(Schema.Struct({ createdAt: Schema.DateFromSelf, id: Schema.String })),
      limit: Schema.Number
    }),
    Result: OutboxEventRow,
    execute: ({ after, limit, status }) =>
      sql`SELECT * FROM outbox_event
          WHERE status = ${status}
          ${
        after === undefined
          ? sql``
          : sql`AND (created_at < ${after.createdAt} OR (created_at = ${after.createdAt} AND id < ${after.id}))`
      }
          ORDER BY created_at DESC, id DESC
          LIMIT ${limit}`
  })
  const listByStatus = (
    status: OutboxStatus,
    page: { readonly after?: OutboxListCursor | undefined; readonly limit: number }
  ) => findPage({ status, after: page.after, limit: page.limit }).pipe(persistence("outbox_event.listByStatus"))

  const oldestPendingAgeMs = oldestAgeMs("outbox_event.oldestPendingAgeMs", ["pending"])

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

export const MysqlOutboxRepository = Layer.effect(OutboxRepository, makeMysqlOutboxRepository)
