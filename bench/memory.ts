import { Queue as BullQueue } from "bullmq"
import { Duration, Effect } from "effect"
import { Redis } from "ioredis"
import type mysql from "mysql2/promise"
import { queueDefaults } from "../src/config/QueueSettings.js"
import { newId } from "../src/domain/Ids.js"
import { legacyStatusOf } from "../src/domain/LifecycleStatus.js"
import { encodeQueuePayload, payloadFor, queueJobIdFor, queuePriorityFor } from "../src/services/JobQueue.js"
import { redactionVersion } from "../src/services/SnapshotBuilder.js"
import { benchChild } from "./childProcess.js"
import { awaitTerminal } from "./engine.js"
import type { BenchTarget } from "./infra.js"
import { monoMillis } from "./infra.js"
import { MemoryReading } from "./memoryProtocol.js"
import { ratio, round } from "./stats.js"

/**
 * Worker memory. 50,000 end-to-end jobs (create + dispatch + run) do not fit the 5-minute
 * budget on this machine, so this part measures the WORKER ALONE: jobs are pre-created in bulk
 * (rows `ai_job` + `ai_job_snapshot` exactly as `createJob` writes them, and their BullMQ jobs
 * with the dispatcher's payload and options, via `addBulk`), and a child process running only
 * `runWorker` on the production layers takes them through PREPARE..COMPLETE. Its
 * `process.memoryUsage()` is read after two forced GCs, once the first batch is all terminal
 * and again once the second is. When the budget is short, both counts shrink by the same factor
 * (the second stays 5 × the first) and the output says what was measured.
 */

const setting = queueDefaults["ai-interactive"]
const targetType = "bench_memory"

const precreate = (pool: mysql.Pool, queue: BullQueue, from: number, count: number) =>
  Effect.gen(function*() {
    const chunk = 500
    for (let start = from; start < from + count; start += chunk) {
      const size = Math.min(chunk, from + count - start)
      const now = new Date()
      const expires = new Date(now.getTime() + 7 * 24 * 3600 * 1000)
      const jobs: Array<{ readonly jobId: string; readonly snapshotId: string; readonly index: number }> = []
      for (let i = 0; i < size; i++) jobs.push({ jobId: yield* newId, snapshotId: yield* newId, index: start + i })
      yield* Effect.promise(() =>
        pool.query(
          `INSERT INTO ai_job (id, user_id, job_type, target_type, target_id, idempotency_key, status, lifecycle_status,
             queue_name, priority, progress, input, credential_mode, credential_id, prompt_version, input_schema_version,
             output_schema_version, attempt_count, max_attempts, created_at, updated_at) VALUES ?`,
          [jobs.map(({ index, jobId }) => [
            jobId,
            `bench-user-${index % 1000}`,
            "synthetic_echo",
            targetType,
            String(index),
            null,
            legacyStatusOf.queued,
            "queued",
            "ai-interactive",
            50,
            0,
            JSON.stringify({ message: `memory job ${index}` }),
            "platform_key",
            null,
            "v1",
            "synthetic_echo.input.v1",
            "synthetic_echo.output.v1",
            0,
            setting.attempts,
            now,
            now
          ])]
        )
      )
      yield* Effect.promise(() =>
        pool.query(
          "INSERT INTO ai_job_snapshot (id, job_id, content, redaction_version, expires_at, created_at) VALUES ?",
          [jobs.map(({ index, jobId, snapshotId }) => [
            snapshotId,
            jobId,
            JSON.stringify({ message: `memory job ${index}` }),
            redactionVersion,
            expires,
            now
          ])]
        )
      )
      yield* Effect.promise(() =>
        queue.addBulk(jobs.map(({ jobId }) => ({
          name: "synthetic_echo",
          data: encodeQueuePayload(payloadFor({ jobId, jobType: "synthetic_echo", createdAt: now })),
          opts: {
            jobId: queueJobIdFor(jobId),
            priority: queuePriorityFor(50),
            attempts: setting.attempts,
            backoff: { type: "exponential", delay: Duration.toMillis(setting.backoffDelay) },
            removeOnComplete: true,
            removeOnFail: true
          }
        })))
      )
    }
  })

export interface MemoryPoint {
  readonly jobs: number
  readonly rssMb: number
  readonly heapUsedMb: number
}

export interface MemoryResult {
  readonly measured: string
  readonly scaledDown: boolean
  readonly concurrency: number
  readonly workerJobsPerSecond: number
  readonly start: MemoryPoint
  readonly first: MemoryPoint
  readonly second: MemoryPoint
  readonly rssGrowthPercent: number
  readonly heapGrowthPercent: number
  readonly notSucceeded: number
}

const mb = (bytes: number) => round(bytes / (1024 * 1024), 1)

const isReading = (message: MemoryReading): message is MemoryReading => message.type === "memory"

export const runMemoryBench = (options: {
  readonly target: BenchTarget
  readonly pool: mysql.Pool
  readonly concurrency: number
  readonly firstJobs: number
  readonly secondJobs: number
  /** Seconds this part may take, start-up included. */
  readonly budgetSeconds: number
}) =>
  Effect.scoped(
    Effect.gen(function*() {
      const began = yield* monoMillis
      const connection = yield* Effect.acquireRelease(
        Effect.sync(() =>
          new Redis(options.target.redisUrl, { maxRetriesPerRequest: null, connectionName: "bench-memory-feeder" })
        ),
        (redis) => Effect.promise(() => redis.quit()).pipe(Effect.timeoutOption("2 seconds"), Effect.ignore)
      )
      const queue = yield* Effect.acquireRelease(
        Effect.sync(() =>
          new BullQueue("ai-interactive", { connection, prefix: `${options.target.redisPrefix}:bull` })
        ),
        (queue) => Effect.promise(() => queue.close()).pipe(Effect.timeoutOption("5 seconds"), Effect.ignore)
      )
      const child = yield* benchChild({
        entry: "./memoryWorker.ts",
        args: [JSON.stringify({ target: options.target, concurrency: options.concurrency })],
        message: MemoryReading,
        exposeGc: true
      })
      const started = yield* child.next(isReading, 60)
      const measure = (label: string) =>
        Effect.zipRight(child.send({ type: "measure", label }), child.next(isReading, 30))

      // Probe: a small batch gives the worker's rate, from which the two points are sized.
      const probe = 1_000
      yield* precreate(options.pool, queue, 0, probe)
      const probeStart = yield* monoMillis
      yield* awaitTerminal(options.pool, targetType, probe, "120 seconds")
      const rate = probe / (((yield* monoMillis) - probeStart) / 1000)
      const left = options.budgetSeconds - ((yield* monoMillis) - began) / 1000 - 10
      const fits = Math.max(0, Math.floor(rate * left * 0.9))
      const scale = Math.min(1, fits / options.secondJobs)
      const plannedSecond = Math.max(probe + 500, Math.floor(options.secondJobs * scale / 100) * 100)
      const firstJobs = Math.max(
        probe,
        Math.floor(plannedSecond * (options.firstJobs / options.secondJobs) / 100) * 100
      )

      const firstStart = yield* monoMillis
      yield* precreate(options.pool, queue, probe, firstJobs - probe)
      yield* awaitTerminal(options.pool, targetType, firstJobs, "240 seconds")
      const first = yield* measure(`after ${firstJobs}`)
      // The probe ran cold; the warm rate of the first batch sizes the second to what is left.
      const warmRate = (firstJobs - probe) / Math.max(0.001, ((yield* monoMillis) - firstStart) / 1000)
      const leftNow = options.budgetSeconds - ((yield* monoMillis) - began) / 1000 - 10
      const secondJobs = Math.min(
        options.secondJobs,
        Math.max(firstJobs * 2, firstJobs + Math.floor((warmRate * leftNow * 0.85) / 100) * 100)
      )
      yield* precreate(options.pool, queue, firstJobs, secondJobs - firstJobs)
      const secondDone = yield* awaitTerminal(options.pool, targetType, secondJobs, "300 seconds")
      const second = yield* measure(`after ${secondJobs}`)

      const point = (jobs: number, reading: MemoryReading): MemoryPoint => ({
        jobs,
        rssMb: mb(reading.rssBytes),
        heapUsedMb: mb(reading.heapUsedBytes)
      })
      return {
        measured:
          `worker alone (child process, runWorker only, concurrency ${options.concurrency}) running pre-created ` +
          `synthetic_echo jobs to succeeded; memoryUsage() after 2 forced GCs (gc exposed: ${first.gcExposed})` +
          (scale < 1 || secondJobs < options.secondJobs
            ? `; scaled down from ${options.firstJobs}/${options.secondJobs} to ${firstJobs}/${secondJobs} jobs to fit the time budget ` +
              `(50,000 end-to-end jobs at this machine's ~${Math.round(warmRate)} jobs/s worker rate would take ` +
              `~${Math.round(options.secondJobs / Math.max(1, warmRate))} s)`
            : ""),
        scaledDown: scale < 1 || secondJobs < options.secondJobs,
        concurrency: options.concurrency,
        workerJobsPerSecond: round(warmRate, 1),
        start: point(0, started),
        first: point(firstJobs, first),
        second: point(secondJobs, second),
        rssGrowthPercent: round((ratio(second.rssBytes, first.rssBytes, 5) - 1) * 100, 1),
        heapGrowthPercent: round((ratio(second.heapUsedBytes, first.heapUsedBytes, 5) - 1) * 100, 1),
        notSucceeded: secondDone.failed
      } satisfies MemoryResult
    })
  )
