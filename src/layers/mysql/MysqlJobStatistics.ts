import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Layer, Schema } from "effect"
import { LifecycleStatus, terminalStatuses } from "../../domain/LifecycleStatus.js"
import { JobStatistics } from "../../services/JobStatistics.js"
import { sqlClock } from "./sqlClock.js"
import { persistence } from "./sqlErrors.js"

/** SUM and COUNT come back as DECIMAL or BIGINT: a string from mysql2. */
const Numeric = Schema.Union(Schema.Number, Schema.NumberFromString)

const TypeStatusRow = Schema.Struct({ jobType: Schema.String, lifecycleStatus: LifecycleStatus, total: Numeric })
const FinishedRow = Schema.Struct({
  jobId: Schema.String,
  jobType: Schema.String,
  lifecycleStatus: LifecycleStatus,
  startedAt: Schema.NullOr(Schema.DateFromSelf),
  finishedAt: Schema.DateFromSelf
})
const UsageDayRow = Schema.Struct({ day: Schema.String, calls: Numeric, totalTokens: Numeric, costMicros: Numeric })

/** The operator's aggregates in SQL; windows are measured by the database's clock. */
export const makeMysqlJobStatistics = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { nowMinus } = sqlClock(sql)

  const counts = SqlSchema.findAll({
    Request: Schema.Void,
    Result: TypeStatusRow,
    execute: () =>
      sql`SELECT job_type, lifecycle_status, COUNT(*) AS total FROM ai_job GROUP BY job_type, lifecycle_status`
  })
  const finished = SqlSchema.findAll({
    Request: Schema.Struct({ window: Schema.DurationFromSelf, limit: Schema.Number }),
    Result: FinishedRow,
    execute: ({ limit, window }) =>
      sql`SELECT id AS job_id, job_type, lifecycle_status, started_at, finished_at FROM ai_job
          WHERE finished_at >= ${nowMinus(window)} AND lifecycle_status IN ${sql.in(terminalStatuses)}
          ORDER BY finished_at, id
          LIMIT ${limit}`
  })
  const usage = SqlSchema.findAll({
    Request: Schema.Number,
    Result: UsageDayRow,
    execute: (days) =>
      sql`SELECT DATE_FORMAT(created_at, '%Y-%m-%d') AS day, COUNT(*) AS calls,
                 COALESCE(SUM(total_tokens), 0) AS total_tokens, COALESCE(SUM(cost_micros), 0) AS cost_micros
          FROM ai_usage_log
          WHERE created_at >= DATE_SUB(UTC_DATE(), INTERVAL ${days - 1} DAY)
          GROUP BY day
          ORDER BY day`
  })

  return JobStatistics.of({
    countsByTypeAndStatus: counts(undefined).pipe(persistence("ai_job.countsByTypeAndStatus")),
    finishedWithin: (window, limit) => finished({ window, limit }).pipe(persistence("ai_job.finishedWithin")),
    usageByDay: (days) => usage(days).pipe(persistence("ai_usage_log.usageByDay"))
  })
})

export const MysqlJobStatistics = Layer.effect(JobStatistics, makeMysqlJobStatistics)
