import type { SqlClient } from "@effect/sql/SqlClient"

/**
 * The database's clock in SQL fragments: every time a repository writes or compares is the
 * server's `UTC_TIMESTAMP(3)`, never a worker's clock (docs/architecture.md §4.7).
 */
export const sqlClock = (sql: SqlClient) => ({
  now: sql.literal("UTC_TIMESTAMP(3)"),
  plusMillis: (millis: number) => sql`DATE_ADD(UTC_TIMESTAMP(3), INTERVAL ${Math.round(millis) * 1000} MICROSECOND)`,
  minusMillis: (millis: number) => sql`DATE_SUB(UTC_TIMESTAMP(3), INTERVAL ${Math.round(millis) * 1000} MICROSECOND)`
})
