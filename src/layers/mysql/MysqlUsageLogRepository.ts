import { SqlClient, SqlSchema } from "@effect/sql"
import { Clock, Effect, Layer, Schema } from "effect"
import { UsageLog, UsageLogRecord } from "../../services/UsageLog.js"
import { persistence } from "./sqlErrors.js"

/** What `record` writes: every column but `created_at`, bound beside it. */
const NewUsageLogRow = UsageLogRecord.pipe(Schema.omit("createdAt"))

export const makeMysqlUsageLog = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  const insertUsage = SqlSchema.void({
    Request: Schema.Struct({ row: NewUsageLogRow, at: Schema.DateFromSelf }),
    // `created_at` is bound (Effect's Clock, DATETIME(3) precision) so the row needs no read-back.
    execute: ({ at, row }) => sql`INSERT INTO ai_usage_log SET ${sql.update(row)}, created_at = ${at}`
  })
  const listUsage = SqlSchema.findAll({
    Request: Schema.String,
    Result: UsageLogRecord,
    execute: (jobId) =>
      sql`SELECT * FROM ai_usage_log WHERE job_id = ${jobId} ORDER BY lease_no, attempt_no, created_at, id`
  })

  return UsageLog.of({
    record: (entry) =>
      Effect.flatMap(Clock.currentTimeMillis, (millis) => {
        const at = new Date(Math.floor(millis))
        return insertUsage({ row: entry, at }).pipe(
          Effect.as<UsageLogRecord>({ ...entry, createdAt: at }),
          persistence("usageLog.record")
        )
      }),
    listByJobId: (jobId) => listUsage(jobId).pipe(persistence("usageLog.listByJobId"))
  })
})

export const MysqlUsageLogRepository = Layer.effect(UsageLog, makeMysqlUsageLog)
