import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { scratchMysqlLayer } from "../support/scratchDatabase.js"

/**
 * The engine's MySQL client reads VARBINARY identifiers as the text they were written as, in every
 * form a statement can answer in: rows, rows as arrays, raw results, unprepared statements and the
 * row sets of a multi-statement query. JSON, numbers, dates and NULL come back as before.
 */
const stack = scratchMysqlLayer("binary_as_text", { maxConnections: 2 }).pipe(Layer.orDie)

const userId = "usér ✓ "
const jobId = "00000000-0000-7000-8000-0000000000aa"

describe("MySQL client: binary strings as text", () => {
  layer(stack, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("every form of result holds the identifiers as strings", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO ai_user_job_gate (user_id, updated_at) VALUES (${userId}, UTC_TIMESTAMP(3))`
        yield* sql.unsafe(
          `INSERT INTO ai_job (id, user_id, job_type, target_type, target_id, idempotency_key, status, lifecycle_status,
             queue_name, priority, progress, input, credential_mode, prompt_version, input_schema_version,
             output_schema_version, attempt_count, max_attempts, created_at, updated_at)
           VALUES (?, ?, 'synthetic_echo', 'test', 't', NULL, 'pending', 'queued', 'ai-interactive', 50, 0,
             '{"message":"hi"}', 'platform_key', 'v1', 'v1', 'v1', 0, 3, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`,
          [jobId, userId]
        )

        const rows =
          yield* sql`SELECT id, user_id, idempotency_key, priority, input, created_at FROM ai_job WHERE id = ${jobId}`
        expect(rows).toHaveLength(1)
        const row = rows[0]!
        expect(row.id).toBe(jobId)
        expect(row.userId).toBe(userId)
        expect(row.idempotencyKey).toBeNull()
        expect(row.priority).toBe(50)
        expect(row.createdAt).toBeInstanceOf(Date)
        expect(typeof row.input === "string" ? JSON.parse(row.input) : row.input).toEqual({ message: "hi" })

        const values = yield* sql`SELECT id, user_id FROM ai_job WHERE id = ${jobId}`.values
        expect(values).toEqual([[jobId, userId]])

        const raw = yield* sql`SELECT user_id FROM ai_job WHERE id = ${jobId}`.raw
        expect(raw).toEqual([{ user_id: userId }])

        const unprepared = yield* sql`SELECT user_id FROM ai_user_job_gate WHERE user_id = ${userId}`.unprepared
        expect(unprepared).toEqual([{ userId }])

        // Two statements in one query: a row set for each.
        const both = yield* sql.unsafe("SELECT id FROM ai_job; SELECT user_id FROM ai_user_job_gate").unprepared
        expect(both).toEqual([[{ id: jobId }], [{ userId }]])
      }))
  })
})
