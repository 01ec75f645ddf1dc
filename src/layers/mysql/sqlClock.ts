import type { SqlClient } from "@effect/sql/SqlClient"
import { Duration } from "effect"

const microseconds = (span: Duration.Duration) => Math.round(Duration.toMillis(span)) * 1000

/**
 * The database's clock in SQL fragments: every time a repository writes or compares is the
 * server's `UTC_TIMESTAMP(3)`, never a worker's clock (docs/architecture.md §4.7).
 */
export const sqlClock = (sql: SqlClient) => ({
  now: sql.literal("UTC_TIMESTAMP(3)"),
  nowPlus: (span: Duration.Duration) => sql`DATE_ADD(UTC_TIMESTAMP(3), INTERVAL ${microseconds(span)} MICROSECOND)`,
  nowMinus: (span: Duration.Duration) => sql`DATE_SUB(UTC_TIMESTAMP(3), INTERVAL ${microseconds(span)} MICROSECOND)`
})
