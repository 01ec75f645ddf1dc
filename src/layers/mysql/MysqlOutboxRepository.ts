import { SqlClient } from "@effect/sql"
import { Array as Arr, Effect, Layer, Option } from "effect"
import type { NewOutboxEvent, OutboxCounts, OutboxStatus } from "../../domain/OutboxEvent.js"
import { allOutboxStatuses } from "../../domain/OutboxEvent.js"

import { OutboxEventNotDead, OutboxEventNotFound, OutboxRepository } from "../../services/OutboxRepository.js"
import { sqlClock } from "./sqlClock.js"
import { affectedRows, decodeOutboxEvents, toJsonText } from "./rows.js"
import { isDuplicateKey, retryOnLockContention, toPersistenceError } from "./sqlErrors.js"

/** `outbox_event` on MySQL; claims use `FOR UPDATE SKIP LOCKED`, times the server's clock. */
export const makeMysqlOutboxRepository = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const { minusMillis, now, plusMillis } = sqlClock(sql)

  const selectByIds = (operation: string, ids: ReadonlyArray<string>) =>
    sql`SELECT * FROM outbox_event WHERE id IN ${sql.in(ids)} ORDER BY available_at, id`.pipe(
      Effect.mapError(toPersistenceError(operation)),
      Effect.flatMap(decodeOutboxEvents(operation))
    )

  const findById = (eventId: string) =>
    selectByIds("outbox_event.findById", [eventId]).pipe(Effect.map(Arr.head))

  const createInTransaction = (event: NewOutboxEvent) =>
    sql`INSERT INTO outbox_event (
          id, event_type, aggregate_type, aggregate_id, dedupe_key, payload, status, attempt_count,
          available_at, created_at, updated_at)
        VALUES (
          ${event.id}, ${event.eventType}, ${event.aggregateType}, ${event.aggregateId}, ${event.dedupeKey},
          ${toJsonText(event.payload)}, 'pending', 0, ${plusMillis(event.delayMs)}, ${now}, ${now})`.pipe(
      Effect.as({ eventId: event.id, duplicate: false }),
      // ADR 4.2: the unique dedupe key refused the row; MySQL keeps the transaction alive.
      Effect.catchIf(isDuplicateKey, () =>
        // A locking read sees the winner's committed row; a plain one may read an older snapshot.
        sql<{ readonly id: string }>`SELECT id FROM outbox_event WHERE dedupe_key = ${event.dedupeKey} LOCK IN SHARE MODE`.pipe(
          Effect.map((rows) => ({ eventId: rows[0]?.id ?? event.id, duplicate: true }))
        )),
      Effect.mapError(toPersistenceError("outbox_event.create"))
    )

  /**
   * A claim is a compare-and-set on primary keys: read the oldest dispatchable ids (a plain,
   * non-locking read), then `pending → processing` on exactly those rows in one UPDATE, and read
   * back the rows this dispatcher won. No range is ever locked, so claims never deadlock with the
   * inserts of concurrent job creations (a `FOR UPDATE SKIP LOCKED` range claim under REPEATABLE
   * READ does); a row another dispatcher took in between simply is not won.
   */
  const claimBatch = (dispatcherId: string, limit: number) =>
    Effect.gen(function* () {
      const candidates = yield* sql<{ readonly id: string }>`
        SELECT id FROM outbox_event
        WHERE status = 'pending' AND available_at <= ${now}
        ORDER BY available_at, id
        LIMIT ${limit}`
      if (candidates.length === 0) return []
      const ids = candidates.map((row) => row.id)
      yield* sql`UPDATE outbox_event SET status = 'processing', locked_by = ${dispatcherId}, locked_at = ${now},
                   updated_at = ${now}
                 WHERE id IN ${sql.in(ids)} AND status = 'pending'`.pipe(retryOnLockContention)
      return ids
    }).pipe(
      Effect.mapError(toPersistenceError("outbox_event.claimBatch")),
      Effect.flatMap((ids) =>
        ids.length === 0
          ? Effect.succeed([])
          : sql`SELECT * FROM outbox_event
                WHERE id IN ${sql.in(ids)} AND status = 'processing' AND locked_by = ${dispatcherId}
                ORDER BY available_at, id`.pipe(
            Effect.mapError(toPersistenceError("outbox_event.claimBatch")),
            Effect.flatMap(decodeOutboxEvents("outbox_event.claimBatch"))
          )
      )
    )

  const markPublishedMany = (eventIds: ReadonlyArray<string>, dispatcherId: string) =>
    eventIds.length === 0
      ? Effect.succeed(0)
      : affectedRows("outbox_event.markPublishedMany")(
        sql`UPDATE outbox_event SET status = 'published', published_at = ${now}, updated_at = ${now}
            WHERE id IN ${sql.in(eventIds)} AND status = 'processing' AND locked_by = ${dispatcherId}`.raw
      )

  const markDispatchFailed: OutboxRepository["Type"]["markDispatchFailed"] = (eventId, dispatcherId, error, options) =>
    Effect.gen(function* () {
      // Assignments read the old attempt_count: the increment comes last (MySQL evaluates SET
      // left to right; MariaDB's SIMULTANEOUS_ASSIGNMENT mode agrees with this order too).
      const changed = yield* affectedRows("outbox_event.markDispatchFailed")(
        sql`UPDATE outbox_event SET
              status = IF(attempt_count + 1 >= ${options.maxAttempts}, 'dead', 'pending'),
              available_at = IF(attempt_count + 1 >= ${options.maxAttempts}, available_at, ${plusMillis(options.retryDelayMs)}),
              last_error = ${error.slice(0, 2000)}, locked_by = NULL, locked_at = NULL, updated_at = ${now},
              attempt_count = attempt_count + 1
            WHERE id = ${eventId} AND status = 'processing' AND locked_by = ${dispatcherId}`.raw
      )
      if (changed === 0) return Option.none()
      const event = yield* findById(eventId)
      return Option.map(event, (row) => (row.status === "dead" ? "dead" as const : "retry_scheduled" as const))
    })

  const releaseClaimsOf = (dispatcherId: string) =>
    affectedRows("outbox_event.releaseClaimsOf")(
      sql`UPDATE outbox_event SET status = 'pending', locked_by = NULL, locked_at = NULL, updated_at = ${now}
          WHERE status = 'processing' AND locked_by = ${dispatcherId}`.raw
    )

  const releaseExpiredLocks = (lockTtlMs: number) =>
    affectedRows("outbox_event.releaseExpiredLocks")(
      sql`UPDATE outbox_event SET status = 'pending', locked_by = NULL, locked_at = NULL, updated_at = ${now}
          WHERE status = 'processing' AND locked_at < ${minusMillis(lockTtlMs)}`.raw
    )

  const countByStatus = sql<{ readonly status: string; readonly total: number }>`
      SELECT status, COUNT(*) AS total FROM outbox_event GROUP BY status`.pipe(
    Effect.mapError(toPersistenceError("outbox_event.countByStatus")),
    Effect.map((rows): OutboxCounts => {
      const counts: Record<OutboxStatus, number> = { pending: 0, processing: 0, published: 0, failed: 0, dead: 0 }
      for (const row of rows) {
        const status = allOutboxStatuses.find((known) => known === row.status)
        if (status !== undefined) counts[status] = Number(row.total)
      }
      return counts
    })
  )

  const replayDead = (eventId: string) =>
    Effect.gen(function* () {
      const changed = yield* affectedRows("outbox_event.replayDead")(
        sql`UPDATE outbox_event SET status = 'pending', attempt_count = 0, available_at = ${now}, last_error = NULL,
              locked_by = NULL, locked_at = NULL, updated_at = ${now}
            WHERE id = ${eventId} AND status = 'dead'`.raw
      )
      const event = yield* findById(eventId)
      if (Option.isNone(event)) return yield* Effect.fail(new OutboxEventNotFound({ eventId }))
      if (changed === 0) return yield* Effect.fail(new OutboxEventNotDead({ eventId, status: event.value.status }))
      return event.value
    })

  return OutboxRepository.of({
    createInTransaction,
    findById,
    claimBatch,
    markPublishedMany,
    markDispatchFailed,
    releaseClaimsOf,
    releaseExpiredLocks,
    countByStatus,
    replayDead
  })
})

export const MysqlOutboxRepository = Layer.effect(OutboxRepository, makeMysqlOutboxRepository)


