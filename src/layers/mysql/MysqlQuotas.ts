import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Layer, Option, Schema } from "effect"
import { admission, QuotaLimitsConfig, Quotas } from "../../services/Quotas.js"
import { sqlClock } from "./sqlClock.js"
import { persistence } from "./sqlErrors.js"

/** SUM over no rows is NULL, hence the COALESCE; mysql2 hands a DECIMAL sum over as a number or a string. */
const Count = Schema.Union(Schema.Number, Schema.NumberFromString)
const UserCounts = Schema.Struct({ active: Count, today: Count })

/**
 * Locks the user's gate row (insert-or-touch takes its exclusive lock until commit), then
 * counts. Two creates of one user therefore count one after the other; other users never wait.
 * The day is the database's UTC day.
 */
export const MysqlQuotas = Layer.effect(
  Quotas,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const { now } = sqlClock(sql)
    const limits = yield* QuotaLimitsConfig
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
    const admit = (userId: string) =>
      touchGate(userId).pipe(
        Effect.zipRight(countJobs(userId)),
        persistence("quotas.admit"),
        Effect.map(Option.getOrElse(() => ({ active: 0, today: 0 }))),
        Effect.flatMap((counts) => admission(userId, limits, counts))
      )
    return Quotas.of({ admit })
  })
)
