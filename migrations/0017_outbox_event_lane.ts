import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * `outbox_event.lane` (docs/architecture.md §6.8): which dispatch lane claims an event, `enqueue`
 * (every event written before this migration) or `notify` (a job's terminal event, for webhooks
 * and the domain-events queue); the index serves each lane's claim. `delivered_to`: the delivery
 * targets that acknowledged a `notify` event so far. Checks first, so a half-applied run (MySQL
 * commits every ALTER) can run again.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const hasColumn = (name: string) =>
    Effect.map(
      sql<{ readonly found: number | string }>`SELECT COUNT(*) AS found FROM information_schema.COLUMNS
        WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'outbox_event' AND COLUMN_NAME = ${name}`,
      (rows) => Number(rows[0]?.found ?? 0) > 0
    )
  if (!(yield* hasColumn("lane"))) {
    yield* sql.unsafe(
      `ALTER TABLE outbox_event ADD COLUMN lane VARCHAR(16) NOT NULL DEFAULT 'enqueue' AFTER event_type`
    )
  }
  if (!(yield* hasColumn("delivered_to"))) {
    yield* sql.unsafe(`ALTER TABLE outbox_event ADD COLUMN delivered_to JSON NULL AFTER last_error`)
  }
  const indexes = yield* sql<
    { readonly found: number | string }
  >`SELECT COUNT(*) AS found FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'outbox_event' AND INDEX_NAME = 'idx_outbox_event_lane'`
  if (Number(indexes[0]?.found ?? 0) === 0) {
    yield* sql.unsafe(`CREATE INDEX idx_outbox_event_lane ON outbox_event (lane, status, available_at)`)
  }
})
