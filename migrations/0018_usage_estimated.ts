import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * `ai_usage_log.usage_estimated`: 1 when the provider's answer reported no token usage (the
 * official chat-completions description makes `usage` optional) and the row's tokens and cost are
 * the engine's estimate; NULL when they are the provider's own count. Checks first, so a
 * half-applied run (MySQL commits every ALTER) can run again.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const columns = yield* sql<
    { readonly found: number | string }
  >`SELECT COUNT(*) AS found FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'ai_usage_log' AND COLUMN_NAME = 'usage_estimated'`
  if (Number(columns[0]?.found ?? 0) === 0) {
    yield* sql.unsafe(`ALTER TABLE ai_usage_log ADD COLUMN usage_estimated INT NULL AFTER error_code`)
  }
})
