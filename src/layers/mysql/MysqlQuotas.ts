import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { QuotaExceeded, TooManyJobs } from "../../domain/QuotaErrors.js"
import { QuotaLimitsConfig, Quotas } from "../../services/Quotas.js"
import { toPersistenceError } from "./sqlErrors.js"

/**
 * Locks the user's gate row (insert-or-touch takes its exclusive lock until commit), then
 * counts. Two creates of one user therefore count one after the other; other users never wait.
 * The day is the database's UTC day.
 */
export const MysqlQuotas = Layer.effect(
  Quotas,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const limits = yield* QuotaLimitsConfig
    const admit = (userId: string) =>
      Effect.gen(function* () {
        yield* sql`INSERT INTO ai_user_job_gate (user_id, updated_at) VALUES (${userId}, UTC_TIMESTAMP(3))
                   ON DUPLICATE KEY UPDATE updated_at = UTC_TIMESTAMP(3)`
        const [counts] = yield* sql<{ readonly active: number | string; readonly today: number | string }>`
          SELECT
            COALESCE(SUM(lifecycle_status IN ('queued', 'running')), 0) AS active,
            COALESCE(SUM(created_at >= UTC_DATE()), 0) AS today
          FROM ai_job WHERE user_id = ${userId}`
        return { active: Number(counts?.active ?? 0), today: Number(counts?.today ?? 0) }
      }).pipe(
        Effect.mapError(toPersistenceError("quotas.admit")),
        Effect.flatMap(({ active, today }): Effect.Effect<void, TooManyJobs | QuotaExceeded> => {
          if (active >= limits.maxActiveJobsPerUser) {
            return Effect.fail(new TooManyJobs({ userId, limit: limits.maxActiveJobsPerUser }))
          }
          if (today >= limits.dailyJobQuota) return Effect.fail(new QuotaExceeded({ userId, limit: limits.dailyJobQuota }))
          return Effect.void
        })
      )
    return Quotas.of({ admit })
  })
)
