import { Deferred, Effect, Either, Schema } from "effect"
import type mysql from "mysql2/promise"
import { createHash, randomUUID } from "node:crypto"
import { decodeQueuePayloadEither } from "../src/services/JobQueue.js"
import { rawQueue } from "./bullmqBaseline.js"
import { committed } from "./floorTransaction.js"
import { monoMillis, query, queryAs, rawPool, runPaced } from "./infra.js"
import { cpuMsPerJobSince } from "./procStat.js"
import { type LatencySummary, round, summarize } from "./stats.js"

/**
 * The durable floor: the engine's job shape written by hand with mysql2 and BullMQ, plain async
 * code (only the load loop that drives it is Effect's). A create is the engine's transaction (the gate row's locking read with the user's two
 * counts, INSERT job, INSERT snapshot, INSERT outbox event, COMMIT, no BEGIN: autocommit is off on
 * the transaction pool as it is in the engine) followed by the creator's own `queue.add`; a run is
 * the lock CAS, the job-with-snapshot read, then INSERT business row, INSERT IGNORE artifact,
 * INSERT usage, UPDATE succeeded, COMMIT. 12 statements and 3 commits a job, as the engine at full
 * load, on copies of the engine's tables (`CREATE TABLE ... LIKE`), so no dispatcher sees them.
 * What Node spends per job here is what this design costs before any engine code runs.
 */
export interface DurableFloor {
  readonly jobs: number
  readonly concurrency: number
  readonly seconds: number
  readonly throughputPerSecond: number
  /** Node CPU (user + system) of this process per job, from the first create to the last completion. */
  readonly cpuMsPerJob: number
  readonly statementsPerJob: number
  readonly commitsPerJob: number
  /** Creates paced at the engine's half-load rate: created_at → started_at on the database clock, as the engine's is read. */
  readonly halfLoad: { readonly ratePerSecond: number; readonly jobs: number; readonly commitToRunning: LatencySummary }
}

const tables = {
  bench_floor_job: "ai_job",
  bench_floor_snapshot: "ai_job_snapshot",
  bench_floor_outbox: "outbox_event",
  bench_floor_gate: "ai_user_job_gate",
  bench_floor_card: "flashcard",
  bench_floor_artifact: "ai_job_artifact",
  bench_floor_usage: "ai_usage_log"
} as const

const users = 1_000
const userOf = (index: number) => `bench-floor-user-${index % users}`

/** The create transaction on a connection whose autocommit is off: its first statement opens it. */
const createJob = async (connection: mysql.PoolConnection, phase: string, index: number): Promise<string> => {
  const jobId = randomUUID()
  const userId = userOf(index)
  const input = JSON.stringify({ message: `floor ${index}` })
  return committed(connection, async () => {
    await connection.execute(
      `SELECT
         (SELECT COUNT(*) FROM bench_floor_job j WHERE j.user_id = g.user_id AND j.lifecycle_status IN ('queued', 'running')) AS active,
         (SELECT COUNT(*) FROM bench_floor_job j WHERE j.user_id = g.user_id AND j.created_at >= UTC_DATE()) AS today
       FROM bench_floor_gate g WHERE g.user_id = ? FOR UPDATE`,
      [userId]
    )
    await connection.execute(
      `INSERT INTO bench_floor_job (
        id, user_id, job_type, target_type, target_id, idempotency_key, status, lifecycle_status, queue_name,
        priority, progress, input, credential_mode, credential_id, prompt_version, input_schema_version,
        output_schema_version, attempt_count, max_attempts, created_at, updated_at)
      VALUES (?, ?, 'synthetic_echo', ?, ?, NULL, 'pending', 'queued', 'ai-interactive',
        50, 0, ?, 'platform_key', NULL, 'v1', 'synthetic_echo.input.v1', 'synthetic_echo.output.v1', 0, 2,
        UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`,
      [jobId, userId, phase, String(index), input]
    )
    await connection.execute(
      `INSERT INTO bench_floor_snapshot (id, job_id, content, redaction_version, expires_at, created_at)
       VALUES (?, ?, ?, 'v1', UTC_TIMESTAMP(3) + INTERVAL 7 DAY, UTC_TIMESTAMP(3))`,
      [randomUUID(), jobId, JSON.stringify({ input, model: "synthetic", prompt: "echo" })]
    )
    await connection.execute(
      `INSERT INTO bench_floor_outbox (
        id, event_type, aggregate_type, aggregate_id, dedupe_key, payload, status, attempt_count,
        available_at, created_at, updated_at)
      VALUES (?, 'ai.job.enqueue', 'AiJob', ?, ?, ?, 'pending', 0, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`,
      [
        randomUUID(),
        jobId,
        `ai.job.enqueue:${jobId}`,
        JSON.stringify({ jobId, jobType: "synthetic_echo", queueName: "ai-interactive" })
      ]
    )
    return jobId
  })
}

/** One run of a job: the lock CAS and the read (autocommit), then the projection transaction. */
const runJob = async (pool: mysql.Pool, transactions: mysql.Pool, jobId: string, workerId: string): Promise<void> => {
  const [locked] = await pool.execute<mysql.ResultSetHeader>(
    `UPDATE bench_floor_job SET lifecycle_status = 'running', status = 'processing', locked_by = ?, locked_at = UTC_TIMESTAMP(3),
       lock_until = UTC_TIMESTAMP(3) + INTERVAL 30 SECOND, attempt_count = attempt_count + 1, lease_no = lease_no + 1, started_at = UTC_TIMESTAMP(3),
       updated_at = UTC_TIMESTAMP(3)
     WHERE id = ? AND lifecycle_status = 'queued'`,
    [workerId, jobId]
  )
  if (locked.affectedRows !== 1) return
  const [rows] = await pool.execute<Array<mysql.RowDataPacket>>(
    `SELECT j.*, s.content AS snapshot_content FROM bench_floor_job j JOIN bench_floor_snapshot s ON s.job_id = j.id WHERE j.id = ?`,
    [jobId]
  )
  const row = rows[0]
  if (row === undefined) throw new Error(`floor job ${jobId} has no snapshot`)
  const output = JSON.stringify({ echo: JSON.parse(String(row["snapshot_content"])) })
  const connection = await transactions.getConnection()
  try {
    await committed(connection, async () => {
      await connection.execute(
        `INSERT INTO bench_floor_card (id, job_id, user_id, ordinal, front, back) VALUES (?, ?, ?, 0, ?, ?)`,
        [randomUUID(), jobId, String(row["user_id"]), output, output]
      )
      await connection.execute(
        `INSERT IGNORE INTO bench_floor_artifact (id, job_id, artifact_type, artifact_id, ordinal, created_at)
         VALUES (?, ?, 'flashcard', ?, 0, UTC_TIMESTAMP(3))`,
        [randomUUID(), jobId, jobId]
      )
      await connection.execute(
        `INSERT INTO bench_floor_usage (id, job_id, lease_no, attempt_no, credential_mode, provider, model, prompt_tokens,
           completion_tokens, total_tokens, cost_micros, latency_ms, created_at)
         VALUES (?, ?, 1, 1, 'platform_key', 'synthetic', 'echo', 10, 10, 20, 0, 1, UTC_TIMESTAMP(3))`,
        [randomUUID(), jobId]
      )
      await connection.execute(
        `UPDATE bench_floor_job SET lifecycle_status = 'succeeded', status = 'completed', progress = 100, output_hash = ?,
           finished_at = UTC_TIMESTAMP(3), lock_until = NULL, updated_at = UTC_TIMESTAMP(3)
         WHERE id = ? AND lifecycle_status = 'running' AND locked_by = ?`,
        [createHash("sha256").update(output).digest("hex"), jobId, workerId]
      )
    })
  } finally {
    connection.release()
  }
}

const StartDelay = Schema.Struct({ delayMs: Schema.Union(Schema.Number, Schema.NumberFromString) })

export const runDurableFloor = (options: {
  readonly databaseUrl: string
  readonly redisUrl: string
  readonly prefix: string
  readonly jobs: number
  readonly concurrency: number
  readonly halfLoad: { readonly ratePerSecond: number; readonly seconds: number }
}) =>
  Effect.scoped(
    Effect.gen(function*() {
      // The engine's pool sizes: 10 autocommit connections and 10 for transactions.
      const pool = yield* rawPool(options.databaseUrl, 10)
      const transactions = yield* rawPool(options.databaseUrl, 10)
      transactions.pool.on("connection", (connection) => {
        connection.query("SET autocommit = 0")
      })
      yield* Effect.forEach(Object.entries(tables), ([copy, original]) =>
        query(pool, `CREATE TABLE ${copy} LIKE ${original}`), { discard: true })
      yield* Effect.addFinalizer(() =>
        Effect.forEach(Object.keys(tables), (copy) =>
          query(pool, `DROP TABLE IF EXISTS ${copy}`), { discard: true }).pipe(Effect.ignore)
      )
      // Every user has a gate row already, as a user the engine's process has admitted before.
      yield* query(
        pool,
        `INSERT INTO bench_floor_gate (user_id, updated_at) VALUES ${
          Array.from({ length: users }, () => "(?, UTC_TIMESTAMP(3))").join(", ")
        }`,
        Array.from({ length: users }, (_, i) =>
          userOf(i))
      )

      let completed = 0
      let target = Number.POSITIVE_INFINITY
      let finished = yield* Deferred.make<number>()
      const workerId = `bench-floor-${process.pid}`
      const { addJob } = yield* rawQueue({
        redisUrl: options.redisUrl,
        prefix: options.prefix,
        name: "bench-durable-floor",
        concurrency: options.concurrency,
        onProcess: async (job) => {
          const payload = decodeQueuePayloadEither(job.data)
          if (Either.isLeft(payload)) {
            throw new Error("floor payload did not decode")
          }
          await runJob(pool, transactions, payload.right.jobId, workerId)
          completed += 1
          if (completed >= target) {
            Deferred.unsafeDone(finished, Effect.succeed(performance.now()))
          }
        }
      })
      const create = (phase: string) => (index: number) =>
        Effect.acquireUseRelease(
          Effect.promise(() =>
            transactions.getConnection()
          ),
          (connection) => Effect.promise(() => createJob(connection, phase, index)),
          (connection) => Effect.sync(() => connection.release())
        ).pipe(Effect.flatMap(addJob), Effect.asVoid)
      const expect = (count: number) =>
        Effect.map(Deferred.make<number>(), (deferred) => {
          completed = 0
          target = count
          finished = deferred
          return Deferred.await(deferred).pipe(Effect.timeout("120 seconds"), Effect.orDie)
        })
      const run = (phase: string, count: number) =>
        Effect.gen(function*() {
          const done = yield* expect(count)
          yield* Effect.forEach(Array.from({ length: count }, (_, i) => i), create(phase), {
            concurrency: options.concurrency,
            discard: true
          })
          return yield* done
        })

      yield* run("bench_floor_warmup", Math.min(200, options.jobs)) // JIT, pools, prepared statements
      const cpuBefore = process.cpuUsage()
      const started = yield* monoMillis
      const end = yield* run("bench_floor_full", options.jobs)
      const cpuMsPerJob = cpuMsPerJobSince(cpuBefore, options.jobs)
      const seconds = (end - started) / 1000

      // Half load: one create at a time on schedule, at the rate the engine's half load ran.
      const rate = Math.max(1, options.halfLoad.ratePerSecond)
      const halfJobs = Math.max(20, Math.round(rate * options.halfLoad.seconds))
      const halfDone = yield* expect(halfJobs)
      yield* runPaced(halfJobs, rate, create("bench_floor_half"))
      yield* halfDone
      const delays = yield* queryAs(
        pool,
        StartDelay,
        `SELECT TIMESTAMPDIFF(MICROSECOND, created_at, started_at) / 1000 AS delayMs FROM bench_floor_job WHERE target_type = 'bench_floor_half'`
      )
      return {
        jobs: options.jobs,
        concurrency: options.concurrency,
        seconds: round(seconds, 3),
        throughputPerSecond: round(options.jobs / seconds, 1),
        cpuMsPerJob,
        statementsPerJob: 12,
        commitsPerJob: 3,
        halfLoad: {
          ratePerSecond: round(rate, 1),
          jobs: halfJobs,
          commitToRunning: summarize(delays.map((row) => row.delayMs))
        }
      } satisfies DurableFloor
    })
  )
