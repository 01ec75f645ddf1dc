import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Layer, Schema } from "effect"
import { PersistenceError } from "../../domain/PersistenceError.js"
import { UsageLog, UsageLogRecord } from "../../services/UsageLog.js"
import { sqlClock } from "./sqlClock.js"
import { persistence } from "./sqlErrors.js"

/** What `record` writes: every column but `created_at`, the database clock's. */
const NewUsageLogRow = UsageLogRecord.pipe(Schema.omit("createdAt"))

/** `ai_usage_log` in MySQL. `created_at` is the database's `UTC_TIMESTAMP(3)`. */
export const makeMysqlUsageLog = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const { now } = sqlClock(sql)

  const insertUsage = SqlSchema.void({
    Request: NewUsageLogRow,
    // `created_at` is the database clock's expression, which `sql.insert` cannot bind: `INSERT ... SET`.
    execute: (row) => sql`INSERT INTO ai_usage_log SET ${sql.update(row)}, created_at = ${now}`
  })
  const singleUsage = SqlSchema.single({
    Request: Schema.String,
    Result: UsageLogRecord,
    execute: (id) => sql`SELECT * FROM ai_usage_log WHERE id = ${id}`
  })
  const listUsage = SqlSchema.findAll({
    Request: Schema.String,
    Result: UsageLogRecord,
    execute: (jobId) => sql`SELECT * FROM ai_usage_log WHERE job_id = ${jobId} ORDER BY lease_no, attempt_no, created_at, id`
  })

  return UsageLog.of({
    record: (entry) =>
      insertUsage(entry).pipe(
        Effect.zipRight(singleUsage(entry.id)),
        Effect.catchTag("NoSuchElementException", () =>
          Effect.fail(new PersistenceError({ operation: "usageLog.record", message: "inserted row not found" }))),
        persistence("usageLog.record")
      ),
    listByJobId: (jobId) => listUsage(jobId).pipe(persistence("usageLog.listByJobId"))
  })
})

export const MysqlUsageLogRepository = Layer.effect(UsageLog, makeMysqlUsageLog)
