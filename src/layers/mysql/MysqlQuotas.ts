import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Layer, Option, Schema } from "effect"
import { admission, QuotaLimitsConfig, Quotas } from "../../services/Quotas.js"
import { sqlClock } from "./sqlClock.js"
import { persistence } from "./sqlErrors.js"

/** SUM over no rows is NULL, hence the COALESCE; mysql2 hands a DECIMAL sum or a BIGINT count over as a number or a string. */
const Count = Schema.Union(Schema.Number, Schema.NumberFromString)
const UserCounts = Schema.Struct({ active: Count, today: Count })

/** Users whose gate row this process has seen; past this many it starts over (a miss only costs the insert path). */
const knownGatesLimit = 100_000

/**
 * Locks the user's gate row until commit, then counts. Two creates of one user therefore count
 * one after the other; other users never wait. The day is the database's UTC day.
 *
 * A user this process has admitted before takes one statement: a locking read of the gate row
 * whose correlated counts run once the lock is held. A user new to the process takes the
 * insert-or-touch first (no gap lock: a locking read of a missing row would take one, and two
 * first creates of one user would deadlock on it), then the counts.
 */
export const MysqlQuotas = Layer.effect(
  Quotas,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const { now } = sqlClock(sql)
    const limits = yield* QuotaLimitsConfig
    const knownGates = new Set<string>()
    const touchGate = SqlSchema.void({
      Request: Schema.String,
      execute: (userId) =>
        sql`INSERT INTO ai_user_job_gate (user_id, updated_at) VALUES (${userId}, ${now})
            ON DUPLICATE KEY UPDATE updated_at = ${now}`
    })
    const countJobs = SqlSchema.findOne({
      Request: Schema.String,
      Result: UserCounts,
      execute: (userId) =>
        sql`SELECT
              COALESCE(SUM(lifecycle_status IN ('queued', 'running')), 0) AS active,
              COALESCE(SUM(created_at >= UTC_DATE()), 0) AS today
            FROM ai_job WHERE user_id = ${userId}`
    })
    // The counts reference the locked row, so they run per row, after its lock is granted: the
    // transaction's first consistent read, they see every create committed before the lock.
    const lockAndCount = SqlSchema.findOne({
      Request: Schema.String,
      Result: UserCounts,
      execute: (userId) =>
        sql`SELECT
              (SELECT COUNT(*) FROM ai_job j WHERE j.user_id = g.user_id AND j.lifecycle_status IN ('queued', 'running')) AS active,
              (SELECT COUNT(*) FROM ai_job j WHERE j.user_id = g.user_id AND j.created_at >= UTC_DATE()) AS today
            FROM ai_user_job_gate g WHERE g.user_id = ${userId} FOR UPDATE`
    })
    const touchAndCount = (userId: string) =>
      touchGate(userId).pipe(
        Effect.zipRight(countJobs(userId)),
        Effect.map(Option.getOrElse(() => ({ active: 0, today: 0 }))),
        Effect.tap(() =>
          Effect.sync(() => {
            if (knownGates.size >= knownGatesLimit) knownGates.clear()
            knownGates.add(userId)
          })
        )
      )
    const counts = (userId: string) =>
      Effect.suspend(() =>
        knownGates.has(userId)
          // A gate row gone since (its create rolled back) falls back to the insert path.
          ? Effect.flatMap(lockAndCount(userId), Option.match({ onNone: () => touchAndCount(userId), onSome: Effect.succeed }))
          : touchAndCount(userId)
      )
    const admit = (userId: string) =>
      counts(userId).pipe(
        persistence("quotas.admit"),
        Effect.flatMap((found) => admission(userId, limits, found))
      )
    return Quotas.of({ admit })
  })
)
