import { type Job, Queue, Worker } from "bullmq"
import { Deferred, Duration, Effect } from "effect"
import { Redis } from "ioredis"
import { queueDefaults } from "../src/config/QueueSettings.js"
import { newId } from "../src/domain/Ids.js"
import { encodeQueuePayload, payloadFor, queueJobIdFor, queuePriorityFor } from "../src/services/JobQueue.js"
import { monoMillis, runPaced } from "./infra.js"
import { cpuMsPerJobSince } from "./procStat.js"
import { type LatencySummary, round, summarize } from "./stats.js"

/**
 * Raw BullMQ, no engine: a Queue and a Worker with a no-op processor on their own connections,
 * and jobs added one `queue.add` at a time by `concurrency` producers. Job options and payload
 * are the engine's own (custom job id, priority, attempts, backoff, remove on completion), so
 * the difference to the engine is the engine, not BullMQ's configuration.
 */

const connection = (redisUrl: string, name: string) =>
  Effect.acquireRelease(
    Effect.sync(() => new Redis(redisUrl, { maxRetriesPerRequest: null, connectionName: name })),
    (redis) => Effect.promise(() => redis.quit()).pipe(Effect.timeoutOption("2 seconds"), Effect.ignore)
  )

const setting = queueDefaults["ai-interactive"]

/** A queue and a worker under `prefix`; `onProcess` is the processor (a no-op for the raw baselines). */
export const rawQueue = (options: {
  readonly redisUrl: string
  readonly prefix: string
  readonly name: string
  readonly concurrency: number
  readonly onProcess: (job: Job) => void | Promise<void>
}) =>
  Effect.gen(function*() {
    const producer = yield* connection(options.redisUrl, "bench-raw-producer")
    const consumer = yield* connection(options.redisUrl, "bench-raw-consumer")
    const queue = yield* Effect.acquireRelease(
      Effect.sync(() => new Queue(options.name, { connection: producer, prefix: options.prefix })),
      (queue) => Effect.promise(() => queue.close()).pipe(Effect.timeoutOption("5 seconds"), Effect.ignore)
    )
    const worker = yield* Effect.acquireRelease(
      Effect.sync(() =>
        new Worker(options.name, async (job) => {
          await options.onProcess(job)
        }, {
          connection: consumer,
          prefix: options.prefix,
          concurrency: options.concurrency,
          lockDuration: Duration.toMillis(setting.lockDuration),
          removeOnComplete: { count: 0 },
          removeOnFail: { count: 0 }
        })
      ),
      (worker) => Effect.promise(() => worker.close()).pipe(Effect.timeoutOption("5 seconds"), Effect.ignore)
    )
    worker.on("error", () => {})
    queue.on("error", () => {})
    yield* Effect.promise(() => worker.waitUntilReady())
    /** Adds the job `jobId` with the engine's payload and options (its fixed id makes a second add a no-op). */
    const addJob = (jobId: string) =>
      Effect.suspend(() => {
        const payload = encodeQueuePayload(payloadFor({ jobId, jobType: "synthetic_echo", createdAt: new Date() }))
        return Effect.promise(() =>
          queue.add("synthetic_echo", payload, {
            jobId: queueJobIdFor(jobId),
            priority: queuePriorityFor(50),
            attempts: setting.attempts,
            backoff: { type: "exponential", delay: Duration.toMillis(setting.backoffDelay) },
            removeOnComplete: true,
            removeOnFail: true
          })
        )
      })
    const add = Effect.flatMap(newId, addJob)
    return { add, addJob, worker }
  })

export interface BullMqBaseline {
  readonly jobs: number
  readonly concurrency: number
  readonly seconds: number
  readonly throughputPerSecond: number
  /** Node CPU (user + system) of this process per job, producer and worker together. */
  readonly cpuMsPerJob: number
}

/** N jobs through a fresh queue: time from the first add to the last completion. */
export const runBullMqThroughput = (options: {
  readonly redisUrl: string
  readonly prefix: string
  readonly jobs: number
  readonly concurrency: number
}) =>
  Effect.scoped(
    Effect.gen(function*() {
      let processed = 0
      let target = Number.POSITIVE_INFINITY
      const done = yield* Deferred.make<number>()
      const { add, worker } = yield* rawQueue({
        redisUrl: options.redisUrl,
        prefix: options.prefix,
        name: "bench-raw-throughput",
        concurrency: options.concurrency,
        onProcess: () => {}
      })
      worker.on("completed", () => {
        processed += 1
        if (processed >= target) Deferred.unsafeDone(done, Effect.succeed(performance.now()))
      })
      // Warm-up, not measured.
      const warmup = Math.min(200, options.jobs)
      target = warmup
      yield* Effect.forEach(Array.from({ length: warmup }), () => add, {
        concurrency: options.concurrency,
        discard: true
      })
      yield* Deferred.await(done).pipe(Effect.timeout("30 seconds"), Effect.orDie)

      const measured = yield* Deferred.make<number>()
      processed = 0
      target = options.jobs
      worker.removeAllListeners("completed")
      worker.on("completed", () => {
        processed += 1
        if (processed >= target) Deferred.unsafeDone(measured, Effect.succeed(performance.now()))
      })
      const cpuBefore = process.cpuUsage()
      const started = yield* monoMillis
      yield* Effect.forEach(Array.from({ length: options.jobs }), () => add, {
        concurrency: options.concurrency,
        discard: true
      })
      const finished = yield* Deferred.await(measured).pipe(Effect.timeout("120 seconds"), Effect.orDie)
      const cpuMsPerJob = cpuMsPerJobSince(cpuBefore, options.jobs)
      const seconds = (finished - started) / 1000
      return {
        jobs: options.jobs,
        concurrency: options.concurrency,
        seconds: round(seconds, 3),
        throughputPerSecond: round(options.jobs / seconds, 1),
        cpuMsPerJob
      } satisfies BullMqBaseline
    })
  )

export interface BullMqPaced {
  readonly ratePerSecond: number
  readonly jobs: number
  /** From just before `queue.add` to the processor starting on the job. */
  readonly addToActive: LatencySummary
}

/** Jobs added at a fixed rate; latency from the add to the no-op processor starting. */
export const runBullMqPaced = (options: {
  readonly redisUrl: string
  readonly prefix: string
  readonly ratePerSecond: number
  readonly seconds: number
  readonly concurrency: number
}) =>
  Effect.scoped(
    Effect.gen(function*() {
      const latencies: Array<number> = []
      const jobs = Math.max(20, Math.round(options.ratePerSecond * options.seconds))
      const all = yield* Deferred.make<void>()
      const { add } = yield* rawQueue({
        redisUrl: options.redisUrl,
        prefix: options.prefix,
        name: "bench-raw-paced",
        concurrency: options.concurrency,
        // BullMQ stamps `job.timestamp` with the producer's Date.now() when the add is issued.
        onProcess: (job) => {
          latencies.push(Date.now() - job.timestamp)
          if (latencies.length >= jobs) Deferred.unsafeDone(all, Effect.void)
        }
      })
      yield* runPaced(jobs, options.ratePerSecond, () => add)
      yield* Deferred.await(all).pipe(Effect.timeout("60 seconds"), Effect.orDie)
      return {
        ratePerSecond: round(options.ratePerSecond, 1),
        jobs,
        addToActive: summarize(latencies)
      } satisfies BullMqPaced
    })
  )
