import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * `ai_job.trace_parent`: the W3C `traceparent` of the request that created the job, so the
 * dispatcher's and the workers' spans continue that trace. Null for jobs created before it (and
 * by callers outside any span). Checks first, so a half-applied run (MySQL commits every ALTER)
 * can run again.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ readonly found: number | string }>`SELECT COUNT(*) AS found FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'ai_job' AND COLUMN_NAME = 'trace_parent'`
  if (Number(rows[0]?.found ?? 0) === 0) {
    yield* sql.unsafe(`ALTER TABLE ai_job ADD COLUMN trace_parent VARCHAR(55) NULL AFTER output_hash`)
  }
})
