import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Leases are numbered, and a provider call is numbered by its lease:
 * - `ai_job.lease_no` counts every time a worker locked the job (hand-offs included) and fences
 *   every worker write, so `attempt_count` can count crashes only;
 * - `ai_usage_log.lease_no` names the lease a call was made in, and `(job_id, lease_no,
 *   attempt_no)` is unique: a zombie and its successor hold different leases, so their calls
 *   cannot share a number.
 * Rows written before this migration get negative lease numbers (-1, or -2 … for the duplicate
 * numbers a zombie wrote), so they stay unique and read as "before leases were numbered".
 * Each step checks first, so a half-applied run (MySQL commits every ALTER) can run again.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const columnExists = (table: string, column: string) =>
    sql<{ readonly found: number | string }>`SELECT COUNT(*) AS found FROM information_schema.COLUMNS
      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ${table} AND COLUMN_NAME = ${column}`.pipe(
      Effect.map((rows) => Number(rows[0]?.found ?? 0) > 0)
    )
  const indexExists = (table: string, index: string) =>
    sql<{ readonly found: number | string }>`SELECT COUNT(*) AS found FROM information_schema.STATISTICS
      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ${table} AND INDEX_NAME = ${index}`.pipe(
      Effect.map((rows) => Number(rows[0]?.found ?? 0) > 0)
    )

  if (!(yield* columnExists("ai_job", "lease_no"))) {
    yield* sql.unsafe(`ALTER TABLE ai_job ADD COLUMN lease_no INT NOT NULL DEFAULT 0 AFTER max_attempts`)
  }
  // Jobs locked before: their lease so far is their attempt.
  yield* sql.unsafe(`UPDATE ai_job SET lease_no = attempt_count WHERE lease_no = 0 AND attempt_count > 0`)

  if (!(yield* columnExists("ai_usage_log", "lease_no"))) {
    yield* sql.unsafe(`ALTER TABLE ai_usage_log ADD COLUMN lease_no INT NOT NULL DEFAULT 0 AFTER job_id`)
  }
  yield* sql.unsafe(`
    UPDATE ai_usage_log AS usage_row
    JOIN (
      SELECT id, ROW_NUMBER() OVER (PARTITION BY job_id, attempt_no ORDER BY created_at, id) AS duplicate_rank
      FROM ai_usage_log WHERE lease_no = 0
    ) AS legacy ON legacy.id = usage_row.id
    SET usage_row.lease_no = -legacy.duplicate_rank`)
  if (!(yield* indexExists("ai_usage_log", "uq_ai_usage_log_call"))) {
    yield* sql.unsafe(`ALTER TABLE ai_usage_log ADD UNIQUE KEY uq_ai_usage_log_call (job_id, lease_no, attempt_no)`)
  }
})
