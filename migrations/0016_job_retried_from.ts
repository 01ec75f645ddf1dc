import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * `ai_job.retried_from_job_id`: the job an operator's retry re-created this one from, so a
 * job's timeline links both ways (the index serves "which jobs retried this one"). Null for
 * every job a client created. Checks first, so a half-applied run (MySQL commits every ALTER)
 * can run again.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const columns = yield* sql<
    { readonly found: number | string }
  >`SELECT COUNT(*) AS found FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'ai_job' AND COLUMN_NAME = 'retried_from_job_id'`
  if (Number(columns[0]?.found ?? 0) === 0) {
    yield* sql.unsafe(`ALTER TABLE ai_job ADD COLUMN retried_from_job_id VARBINARY(36) NULL AFTER trace_parent`)
  }
  const indexes = yield* sql<
    { readonly found: number | string }
  >`SELECT COUNT(*) AS found FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'ai_job' AND INDEX_NAME = 'idx_ai_job_retried_from'`
  if (Number(indexes[0]?.found ?? 0) === 0) {
    yield* sql.unsafe(`CREATE INDEX idx_ai_job_retried_from ON ai_job (retried_from_job_id)`)
  }
})
