import { Effect } from "effect"
import type mysql from "mysql2/promise"
import { randomUUID } from "node:crypto"
import { monoMillis, query, rawPool } from "./infra.js"
import { round } from "./stats.js"

/**
 * Raw MySQL, no engine: the create transaction's shape with mysql2 directly: BEGIN, INSERT the
 * job row, INSERT the outbox row, COMMIT, as fast as `concurrency` clients go on a pool as large
 * as the engine's (10). The rows go to copies of `ai_job` and `outbox_event` (same columns and
 * indexes, `CREATE TABLE ... LIKE`) so the engine's dispatcher never sees them.
 */
export interface MysqlBaseline {
  readonly transactions: number
  readonly concurrency: number
  readonly seconds: number
  readonly transactionsPerSecond: number
  /** 2 inserts + BEGIN + COMMIT. */
  readonly statementsPerTransaction: number
  readonly commitsPerTransaction: number
}

const createShape = (connection: mysql.PoolConnection, index: number) =>
  Effect.promise(async () => {
    const jobId = randomUUID()
    await connection.beginTransaction()
    try {
      await connection.execute(
        `INSERT INTO bench_raw_job (
          id, user_id, job_type, target_type, target_id, idempotency_key, status, lifecycle_status, queue_name,
          priority, progress, input, credential_mode, credential_id, prompt_version, input_schema_version,
          output_schema_version, attempt_count, max_attempts, created_at, updated_at)
        VALUES (?, ?, 'synthetic_echo', 'bench_raw', ?, NULL, 'PENDING', 'queued', 'ai-interactive',
          50, 0, ?, 'platform_key', NULL, 'v1', 'synthetic_echo.input.v1', 'synthetic_echo.output.v1', 0, 2,
          UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`,
        [jobId, `bench-user-${index % 1000}`, String(index), JSON.stringify({ message: `raw ${index}` })]
      )
      await connection.execute(
        `INSERT INTO bench_raw_outbox (
          id, event_type, aggregate_type, aggregate_id, dedupe_key, payload, status, attempt_count,
          available_at, created_at, updated_at)
        VALUES (?, 'ai.job.enqueue', 'AiJob', ?, ?, ?, 'pending', 0, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`,
        [
          randomUUID(),
          jobId,
          `ai.job.enqueue:${jobId}`,
          JSON.stringify({ jobId, jobType: "synthetic_echo", queueName: "ai-interactive", priority: 50 })
        ]
      )
      await connection.commit()
    } catch (error) {
      await connection.rollback()
      throw error
    }
  })

export const runMysqlBaseline = (
  options: { readonly databaseUrl: string; readonly transactions: number; readonly concurrency: number }
) =>
  Effect.scoped(
    Effect.gen(function*() {
      const pool = yield* rawPool(options.databaseUrl, 10)
      yield* query(pool, "CREATE TABLE bench_raw_job LIKE ai_job")
      yield* query(pool, "CREATE TABLE bench_raw_outbox LIKE outbox_event")
      yield* Effect.addFinalizer(() =>
        Effect.zipRight(
          query(pool, "DROP TABLE IF EXISTS bench_raw_job"),
          query(pool, "DROP TABLE IF EXISTS bench_raw_outbox")
        )
          .pipe(Effect.ignore)
      )
      const run = (count: number, offset: number) =>
        Effect.forEach(
          Array.from({ length: count }, (_, i) => offset + i),
          (index) =>
            Effect.acquireUseRelease(
              Effect.promise(() => pool.getConnection()),
              (connection) => createShape(connection, index),
              (connection) => Effect.sync(() => connection.release())
            ),
          { concurrency: options.concurrency, discard: true }
        )
      yield* run(Math.min(200, options.transactions), 1_000_000) // warm-up
      const started = yield* monoMillis
      yield* run(options.transactions, 0)
      const seconds = ((yield* monoMillis) - started) / 1000
      return {
        transactions: options.transactions,
        concurrency: options.concurrency,
        seconds: round(seconds, 3),
        transactionsPerSecond: round(options.transactions / seconds, 1),
        statementsPerTransaction: 4,
        commitsPerTransaction: 1
      } satisfies MysqlBaseline
    })
  )
