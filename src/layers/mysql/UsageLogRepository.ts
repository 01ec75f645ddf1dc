import { SqlClient } from "@effect/sql"
import { Effect, Layer, ParseResult, Schema } from "effect"
import { PersistenceError } from "../../domain/PersistenceError.js"
import { UsageLog, UsageLogRecord } from "../../services/UsageLog.js"
import { persistence } from "./sqlErrors.js"

const decodeRows = (operation: string) => (rows: ReadonlyArray<unknown>) =>
  Schema.decodeUnknown(Schema.Array(UsageLogRecord))(rows).pipe(
    Effect.mapError((error) =>
      new PersistenceError({ operation, message: `row does not decode: ${ParseResult.TreeFormatter.formatErrorSync(error)}` })
    )
  )

/** `ai_usage_log` in MySQL. `created_at` is the database's `UTC_TIMESTAMP(3)`. */
export const makeMysqlUsageLog = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  const selectById = (id: string) =>
    sql`SELECT * FROM ai_usage_log WHERE id = ${id}`.pipe(persistence("usageLog.record"), Effect.flatMap(decodeRows("usageLog.record")))

  return UsageLog.of({
    record: (entry) =>
      Effect.gen(function* () {
        yield* sql`
          INSERT INTO ai_usage_log
            (id, job_id, lease_no, attempt_no, credential_mode, provider, model, prompt_tokens, completion_tokens,
             total_tokens, cost_micros, latency_ms, error_code, created_at)
          VALUES
            (${entry.id}, ${entry.jobId}, ${entry.leaseNo}, ${entry.attemptNo}, ${entry.credentialMode}, ${entry.provider}, ${entry.model},
             ${entry.promptTokens}, ${entry.completionTokens}, ${entry.totalTokens}, ${entry.costMicros},
             ${entry.latencyMs}, ${entry.errorCode}, UTC_TIMESTAMP(3))`.pipe(persistence("usageLog.record"))
        const rows = yield* selectById(entry.id)
        const row = rows[0]
        if (row === undefined) {
          return yield* new PersistenceError({ operation: "usageLog.record", message: "inserted row not found" })
        }
        return row
      }),
    listByJobId: (jobId) =>
      sql`SELECT * FROM ai_usage_log WHERE job_id = ${jobId} ORDER BY lease_no, attempt_no, created_at, id`.pipe(
        persistence("usageLog.listByJobId"),
        Effect.flatMap(decodeRows("usageLog.listByJobId"))
      )
  })
})

export const MysqlUsageLogRepository = Layer.effect(UsageLog, makeMysqlUsageLog)
