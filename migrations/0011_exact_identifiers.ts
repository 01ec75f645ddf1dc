import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"

/*
 * Identifiers compare exactly. `utf8mb4_bin` is a PAD SPACE collation: "victim1" = "victim1 ",
 * while the code compares with `===`. VARBINARY compares byte for byte on MariaDB 10.11 and
 * MySQL 8 alike (the NO PAD binary collations differ by name between the two servers).
 *
 * The columns, each an identifier the engine looks up, fences on or keys a row by:
 *   ai_job                 id, user_id, target_id, idempotency_key, credential_id, locked_by
 *   ai_job_snapshot        id, job_id
 *   ai_job_artifact        id, job_id, artifact_id
 *   outbox_event           id, aggregate_id, dedupe_key, locked_by
 *   ai_usage_log           id, job_id
 *   user_model_credential  id, user_id
 *   flashcard              id, job_id, user_id, deck_id
 *   learning_evaluation    id, job_id, user_id
 *   ai_user_job_gate       user_id
 *   synthetic_echo_result  id, job_id
 * Left as text: names from the engine's own vocabulary (job_type, target_type, artifact_type,
 * statuses, queue, provider, model, versions, codes) and hex digests; none comes from a client.
 *
 * Widths: a CHAR(36) column only ever held a UUID the engine generated (36 ASCII bytes); a
 * VARCHAR(n) utf8mb4 column may hold up to 4n bytes, so it becomes VARBINARY(4n): every stored
 * value converts without loss and every index keeps its byte size.
 *
 * Also `ai_job.request_hash`: SHA-256 of the canonical request an idempotency key was first used
 * with (job type + canonical JSON of the input). Rows created before it have NULL, which matches
 * any request: their keys keep answering as they did.
 *
 * MODIFY COLUMN to the same definition is a no-op, and the column is only added when missing
 * (MySQL 8 has no ADD COLUMN IF NOT EXISTS), so a half-applied run can simply run again.
 */

const alterations: ReadonlyArray<readonly [table: string, columns: ReadonlyArray<string>]> = [
  ["ai_job", [
    "id VARBINARY(36) NOT NULL",
    "user_id VARBINARY(256) NOT NULL",
    "target_id VARBINARY(764) NOT NULL",
    "idempotency_key VARBINARY(764) NULL",
    "credential_id VARBINARY(36) NULL",
    "locked_by VARBINARY(512) NULL"
  ]],
  ["ai_job_snapshot", ["id VARBINARY(36) NOT NULL", "job_id VARBINARY(36) NOT NULL"]],
  ["ai_job_artifact", [
    "id VARBINARY(36) NOT NULL",
    "job_id VARBINARY(36) NOT NULL",
    "artifact_id VARBINARY(764) NOT NULL"
  ]],
  ["outbox_event", [
    "id VARBINARY(36) NOT NULL",
    "aggregate_id VARBINARY(256) NOT NULL",
    "dedupe_key VARBINARY(1020) NOT NULL",
    "locked_by VARBINARY(512) NULL"
  ]],
  ["ai_usage_log", ["id VARBINARY(36) NOT NULL", "job_id VARBINARY(36) NOT NULL"]],
  ["user_model_credential", ["id VARBINARY(36) NOT NULL", "user_id VARBINARY(256) NOT NULL"]],
  ["flashcard", [
    "id VARBINARY(36) NOT NULL",
    "job_id VARBINARY(36) NOT NULL",
    "user_id VARBINARY(256) NOT NULL",
    "deck_id VARBINARY(256) NULL"
  ]],
  ["learning_evaluation", [
    "id VARBINARY(36) NOT NULL",
    "job_id VARBINARY(36) NOT NULL",
    "user_id VARBINARY(256) NOT NULL"
  ]],
  ["ai_user_job_gate", ["user_id VARBINARY(256) NOT NULL"]],
  ["synthetic_echo_result", ["id VARBINARY(36) NOT NULL", "job_id VARBINARY(36) NOT NULL"]]
]

const decodeColumnCount = Schema.decodeUnknown(
  Schema.Array(Schema.Struct({ found: Schema.Union(Schema.Number, Schema.NumberFromString) }))
)

export default Effect.gen(function*() {
  const sql = (yield* SqlClient.SqlClient).withoutTransforms()
  for (const [table, columns] of alterations) {
    yield* sql.unsafe(`ALTER TABLE ${table} ${columns.map((column) => `MODIFY COLUMN ${column}`).join(", ")}`)
  }
  const rows = yield* sql`
    SELECT COUNT(*) AS found FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'ai_job' AND COLUMN_NAME = 'request_hash'`
  const [existing] = yield* decodeColumnCount(rows)
  if ((existing?.found ?? 0) === 0) {
    yield* sql.unsafe("ALTER TABLE ai_job ADD COLUMN request_hash CHAR(64) NULL AFTER idempotency_key")
  }
})
