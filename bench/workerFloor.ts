/**
 * The worker floor: what the engine's worker does for one flashcard job in `bench:goodput`, written
 * by hand with BullMQ, mysql2, ioredis and fetch, plain async code with no Effect. `bench:goodput`
 * runs it in place of `dist/worker.js` (beside the engine's API and dispatcher, on the same queues,
 * tables and limiter keys), so the worker's CPU and RSS at 500 jobs in flight can be read against
 * what the job's own I/O costs in Node. Per job, as the engine:
 * - the delivery from BullMQ (its Worker, the engine's queue options);
 * - the lock compare-and-set and the job-with-snapshot read (autocommit);
 * - an event published on the lock, when the provider call starts, and on success;
 * - a permit from the engine's own limiter scripts (interactive first; one pump asks Redis for
 *   the head waiter, sleeping until the store's retry time or a release), released with the usage;
 * - the provider call under a timeout, its JSON parsed and checked, the output hashed;
 * - the projection transaction: the cards, the artifact, the usage row, `succeeded`, COMMIT;
 * - one batched lease extension per heartbeat for every job held.
 * Left out, as no job needs them to succeed here: retries, cancel listening, the worker directory's
 * beats, logs, spans and metrics, and Schema decoding.
 */
import { Worker } from "bullmq"
import { Redis } from "ioredis"
import mysql from "mysql2/promise"
import { createHash, randomUUID } from "node:crypto"
import { releaseScript, tryAcquireScript } from "../src/layers/redis/capacityScripts.js"
import { committed } from "./floorTransaction.js"

const setting = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback
  if (value === undefined) throw new Error(`worker floor: ${name} is not set`)
  return value
}

const prefix = setting("REDIS_KEY_PREFIX", "ai-job-engine")
const workerId = setting("WORKER_ID", `worker-floor-${process.pid}`)
const lockTtlMs = Number(setting("JOB_LOCK_TTL_MS", "60000"))
const heartbeatMs = Number(setting("JOB_HEARTBEAT_MS", "15000"))
const baseUrl = setting("AI_BASE_URL").replace(/\/+$/, "")
const apiKey = setting("AI_API_KEY")
const poolSize = Number(setting("DATABASE_POOL_SIZE", "10"))
const providerModel = "deepseek/deepseek-chat"
const model = "deepseek-chat"
const limit =
  (JSON.parse(setting("AI_RATE_LIMITS", "{}")) as Record<string, { rpm?: number; tpm?: number; concurrency?: number }>)[
    providerModel
  ] ?? {}
const callTimeoutMs = 60_000
const maxTokens = 1_000

const redis = new Redis(setting("REDIS_URL"), { maxRetriesPerRequest: null })
const pool = mysql.createPool({ uri: setting("DATABASE_URL"), connectionLimit: poolSize })
// Transactions on connections whose autocommit is off: the first statement opens one (no BEGIN).
const transactions = mysql.createPool({ uri: setting("DATABASE_URL"), connectionLimit: poolSize })
transactions.pool.on("connection", (connection) => void connection.query("SET autocommit = 0"))

const publish = (jobId: string, lifecycleStatus: string, progress: number, stage: string) =>
  void redis
    .publish(
      `${prefix}:job:events:${jobId}`,
      JSON.stringify({ jobId, lifecycleStatus, progress, stage, attempt: 1, at: new Date().toISOString() })
    )
    .catch(() => undefined)

// --- The limiter: the engine's scripts, one pump for the one model ---------------------------

const capacityBase = `${prefix}:capacity:{${providerModel}}`
const capacityKeys = ["log", "tok", "held", "st", "marks"].map((name) => `${capacityBase}:${name}`)
const sha = (source: string) => createHash("sha1").update(source).digest("hex")
const script = (source: string) => {
  const digest = sha(source)
  return async (args: ReadonlyArray<string>): Promise<unknown> => {
    try {
      return await redis.evalsha(digest, capacityKeys.length, ...capacityKeys, ...args)
    } catch (error) {
      if (error instanceof Error && error.message.startsWith("NOSCRIPT")) {
        return await redis.eval(source, capacityKeys.length, ...capacityKeys, ...args)
      }
      throw error
    }
  }
}
const tryAcquire = script(tryAcquireScript)
const releaseInStore = script(releaseScript)
const optional = (value: number | undefined) => (value === undefined ? "" : String(value))

interface Waiter {
  readonly permitId: string
  readonly tokens: number
  readonly priority: "interactive" | "background"
  readonly grant: () => void
}
const waiting = { interactive: [] as Array<Waiter>, background: [] as Array<Waiter> }
let permitCounter = 0
let pumping = false
let releaseMayFree = true
let wake: (() => void) | undefined

const sleepOrWake = (ms: number) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      wake = undefined
      resolve()
    }, ms)
    wake = () => {
      clearTimeout(timer)
      wake = undefined
      resolve()
    }
  })

const pump = async (): Promise<void> => {
  if (pumping) return wake?.()
  pumping = true
  try {
    for (;;) {
      const head = waiting.interactive[0] ?? waiting.background[0]
      if (head === undefined) return
      const reply = (await tryAcquire([
        String(Date.now()),
        head.permitId,
        String(head.tokens),
        head.priority,
        workerId,
        String(waiting.interactive.length),
        optional(limit.rpm),
        optional(limit.tpm),
        optional(limit.concurrency),
        "1",
        String(lockTtlMs)
      ])) as [number, string?, number?]
      releaseMayFree = reply[0] === 1 || reply[2] === 1
      if (reply[0] === 1) {
        waiting[head.priority].shift()
        head.grant()
        continue
      }
      const delay = Number(reply[1]) - Date.now()
      if (delay > 0) await sleepOrWake(delay)
    }
  } finally {
    pumping = false
  }
}

const acquire = (priority: Waiter["priority"], tokens: number) =>
  new Promise<string>((resolve) => {
    const permitId = `${workerId}-${++permitCounter}`
    waiting[priority].push({ permitId, tokens, priority, grant: () => resolve(permitId) })
    void pump()
  })

const release = async (
  permitId: string,
  outcome: "success" | "overload" | "neutral",
  totalTokens: number | undefined
) => {
  await releaseInStore([String(Date.now()), permitId, outcome, optional(totalTokens), optional(limit.concurrency), "1"])
  if (releaseMayFree) wake?.()
}

// --- Leases: one batched extension per heartbeat ---------------------------------------------

const held = new Map<string, number>()
setInterval(() => {
  if (held.size === 0) return
  const ids = [...held.keys()]
  void pool
    .execute(
      `UPDATE ai_job SET lock_until = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, updated_at = UTC_TIMESTAMP(3)
       WHERE id IN (${ids.map(() => "?").join(",")}) AND lifecycle_status = 'running' AND locked_by = ?`,
      [lockTtlMs * 1000, ...ids, workerId]
    )
    .catch(() => undefined)
}, heartbeatMs).unref()

// --- The two job types the bench creates: instructions and business rows -----------------------

interface BusinessRows {
  readonly table: string
  /** The first column is the row's id, which its artifact names. */
  readonly columns: ReadonlyArray<string>
  readonly values: ReadonlyArray<ReadonlyArray<string | number>>
}
interface FloorJobType {
  readonly instructions: string
  readonly artifactType: string
  readonly rows: (output: unknown, jobId: string, userId: string) => BusinessRows
}
const field = (value: unknown, name: string): unknown =>
  typeof value === "object" && value !== null ? (value as Record<string, unknown>)[name] : undefined

const jobTypes: Record<string, FloorJobType> = {
  flashcard_generation: {
    instructions: "You write flashcards. Answer with JSON: {\"flashcards\": [{\"front\": string, \"back\": string}]}.",
    artifactType: "flashcard",
    rows: (output, jobId, userId) => {
      const cards = field(output, "flashcards")
      return {
        table: "flashcard",
        columns: ["id", "job_id", "user_id", "ordinal", "front", "back"],
        values: (Array.isArray(cards) ? cards : []).flatMap((card: unknown, ordinal) => {
          const front = field(card, "front")
          const back = field(card, "back")
          return typeof front === "string" && typeof back === "string"
            ? [[randomUUID(), jobId, userId, ordinal, front, back]]
            : []
        })
      }
    }
  },
  feynman_evaluation: {
    instructions:
      "You evaluate a Feynman explanation. Answer with JSON: {\"score\": 0-100, \"feedback\": string, \"gaps\": [string]}.",
    artifactType: "learning_evaluation",
    rows: (output, jobId, userId) => {
      const score = field(output, "score")
      const feedback = field(output, "feedback")
      const gaps = field(output, "gaps")
      return {
        table: "learning_evaluation",
        columns: ["id", "job_id", "user_id", "concept", "score", "feedback", "gaps"],
        values: typeof score === "number" && typeof feedback === "string" && Array.isArray(gaps)
          ? [[randomUUID(), jobId, userId, "probe", score, feedback, JSON.stringify(gaps)]]
          : []
      }
    }
  }
}

// --- One job ----------------------------------------------------------------------------------

interface CompletionBody {
  readonly choices?: ReadonlyArray<{ readonly message?: { readonly content?: string } }>
  readonly usage?: {
    readonly prompt_tokens?: number
    readonly completion_tokens?: number
    readonly total_tokens?: number
  }
}

const runJob = async (jobId: string, queueName: string): Promise<void> => {
  const [locked] = await pool.execute<mysql.ResultSetHeader>(
    `UPDATE ai_job SET lifecycle_status = 'running', status = 'processing', progress = GREATEST(progress, 5), locked_by = ?,
       locked_at = UTC_TIMESTAMP(3), lock_until = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, started_at = COALESCE(started_at, UTC_TIMESTAMP(3)),
       attempt_count = attempt_count + 1, lease_no = lease_no + 1, updated_at = UTC_TIMESTAMP(3)
     WHERE id = ? AND lifecycle_status = 'queued'`,
    [workerId, lockTtlMs * 1000, jobId]
  )
  if (locked.affectedRows !== 1) return
  const [rows] = await pool.execute<Array<mysql.RowDataPacket>>(
    `SELECT j.*, s.id AS snapshot_row_id, s.content AS snapshot_content FROM ai_job j LEFT JOIN ai_job_snapshot s ON s.job_id = j.id WHERE j.id = ?`,
    [jobId]
  )
  const job = rows[0]
  if (job === undefined) throw new Error(`job ${jobId} vanished after its lock`)
  const leaseNo = Number(job["lease_no"])
  held.set(jobId, leaseNo)
  publish(jobId, "running", 5, "PREPARE")
  try {
    const input = typeof job["snapshot_content"] === "string"
      ? job["snapshot_content"]
      : JSON.stringify(job["snapshot_content"])
    const jobType = jobTypes[String(job["job_type"])]
    if (jobType === undefined) throw new Error(`job ${jobId}: the floor does not run ${String(job["job_type"])}`)
    const messages = [{ role: "system", content: jobType.instructions }, { role: "user", content: input }]
    const estimate = Math.ceil(messages.reduce((sum, message) => sum + message.content.length, 0) / 4) + maxTokens
    const permitId = await acquire(queueName === "ai-interactive" ? "interactive" : "background", estimate)
    publish(jobId, "running", 20, "EXECUTE")
    const started = performance.now()
    let response: Response
    let text: string
    try {
      response = await fetch(`${baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({
          model,
          messages,
          temperature: 0.2,
          max_tokens: maxTokens,
          response_format: { type: "json_object" },
          stream: false
        }),
        signal: AbortSignal.timeout(callTimeoutMs)
      })
      text = await response.text()
    } catch (error) {
      await release(permitId, "overload", undefined) // a timeout, as the engine counts it
      throw error
    }
    if (response.status !== 200) {
      // Sent, so it stays counted in the window; a 429 or 503 is the provider's overload.
      await release(permitId, response.status === 429 || response.status === 503 ? "overload" : "neutral", undefined)
      throw new Error(`provider answered ${response.status}`)
    }
    const body = JSON.parse(text) as CompletionBody
    const latencyMs = Math.round(performance.now() - started)
    const usage = body.usage ?? {}
    await release(permitId, "success", usage.total_tokens)
    const output: unknown = JSON.parse(body.choices?.[0]?.message?.content ?? "")
    const rows = jobType.rows(output, jobId, String(job["user_id"]))
    if (rows.values.length === 0) throw new Error(`job ${jobId}: the output has no ${jobType.artifactType}`)
    const outputHash = createHash("sha256").update(JSON.stringify(output)).digest("hex")

    const connection = await transactions.getConnection()
    try {
      await committed(connection, async () => {
        await connection.execute(
          `INSERT INTO ${rows.table} (${rows.columns.join(", ")}, created_at) VALUES ${
            rows.values.map((row) => `(${row.map(() => "?").join(", ")}, UTC_TIMESTAMP(3))`).join(", ")
          }`,
          rows.values.flat()
        )
        await connection.execute(
          `INSERT IGNORE INTO ai_job_artifact (id, job_id, artifact_type, artifact_id, ordinal, created_at)
           VALUES ${rows.values.map(() => "(?, ?, ?, ?, ?, UTC_TIMESTAMP(3))").join(", ")}`,
          rows.values.flatMap((row, ordinal) => [randomUUID(), jobId, jobType.artifactType, String(row[0]), ordinal])
        )
        await connection.execute(
          `INSERT INTO ai_usage_log (id, job_id, lease_no, attempt_no, credential_mode, provider, model, prompt_tokens,
             completion_tokens, total_tokens, cost_micros, latency_ms, created_at)
           VALUES (?, ?, ?, 1, 'platform_key', 'deepseek', ?, ?, ?, ?, 0, ?, UTC_TIMESTAMP(3))`,
          [
            randomUUID(),
            jobId,
            leaseNo,
            model,
            usage.prompt_tokens ?? 0,
            usage.completion_tokens ?? 0,
            usage.total_tokens ?? 0,
            latencyMs
          ]
        )
        const [succeeded] = await connection.execute<mysql.ResultSetHeader>(
          `UPDATE ai_job SET lifecycle_status = 'succeeded', status = 'completed', progress = 100, output_hash = ?,
             finished_at = UTC_TIMESTAMP(3), lock_until = NULL, updated_at = UTC_TIMESTAMP(3)
           WHERE id = ? AND lifecycle_status = 'running' AND locked_by = ? AND lease_no = ?`,
          [outputHash, jobId, workerId, leaseNo]
        )
        if (succeeded.affectedRows !== 1) throw new Error(`job ${jobId}: lease lost`)
      })
    } finally {
      connection.release()
    }
    publish(jobId, "succeeded", 100, "COMPLETE")
  } catch (error) {
    // Given back queued, so the queue's next delivery of it can lock it again.
    await pool.execute(
      `UPDATE ai_job SET lifecycle_status = 'queued', status = 'pending', locked_by = NULL, lock_until = NULL, updated_at = UTC_TIMESTAMP(3)
       WHERE id = ? AND lifecycle_status = 'running' AND locked_by = ? AND lease_no = ?`,
      [jobId, workerId, leaseNo]
    )
    throw error
  } finally {
    held.delete(jobId)
  }
}

// --- The queues, with the engine's options ----------------------------------------------------

const queues = [
  {
    name: "ai-interactive",
    concurrency: Number(setting("WORKER_CONCURRENCY_INTERACTIVE", "50")),
    lockDuration: 30_000
  },
  { name: "ai-background", concurrency: Number(setting("WORKER_CONCURRENCY_BACKGROUND", "20")), lockDuration: 60_000 }
]
const workers = queues.map(
  (queue) =>
    new Worker(
      queue.name,
      async (delivery) => {
        const data = delivery.data as { jobId?: unknown }
        if (typeof data.jobId !== "string") throw new Error("the payload has no job id")
        await runJob(data.jobId, queue.name)
      },
      {
        connection: new Redis(setting("REDIS_URL"), { maxRetriesPerRequest: null }),
        prefix: `${prefix}:bull`,
        concurrency: queue.concurrency,
        lockDuration: queue.lockDuration,
        removeOnComplete: { count: 0 },
        removeOnFail: { count: 0 }
      }
    )
)
for (const worker of workers) worker.on("error", (error) => process.stderr.write(`worker floor: ${error.message}\n`))

const stop = () => {
  void Promise.all(workers.map((worker) => worker.close())).finally(() => process.exit(0))
}
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
await Promise.all(workers.map((worker) => worker.waitUntilReady()))
// The line `bench:goodput` waits for, as it waits for the engine's "worker started".
process.stdout.write("worker started (floor)\n")
