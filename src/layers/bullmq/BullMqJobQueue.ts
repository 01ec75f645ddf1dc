import { type Job, Queue, UnrecoverableError, WaitingError, Worker } from "bullmq"
import { Cause, Clock, Duration, Effect, Exit, Layer, Option, Runtime, type Scope } from "effect"
import { QueueSettings } from "../../config/QueueSettings.js"
import { allQueueNames, type QueueName } from "../../domain/QueueName.js"
import {
  type AiJobQueuePayloadEncoded,
  type ConsumeOptions,
  decodeQueuePayloadEither,
  encodeQueuePayload,
  isStoppingHandOff,
  type JobDelivery,
  JobHandedOff,
  JobQueue,
  type JobQueueAddRequest,
  JobQueueUnavailable,
  payloadErrorPaths,
  type QueueJobState,
  queuePriorityFor
} from "../../services/JobQueue.js"
import { RedisConnection } from "../redis/RedisConnection.js"

const errorMessage = (error: unknown): string => (error instanceof Error ? error.message : String(error))

const unavailable = (operation: string) => (error: unknown) =>
  new JobQueueUnavailable({ operation, message: errorMessage(error) })

/**
 * Logs what a BullMQ worker reports on `error` (lock renewals, stalled-job checks, a lost
 * connection), at warning, with the error's message only: never a job's data. A message that
 * repeats the previous one is skipped until `connection` is ready again, since an outage
 * repeats its error on every reconnect.
 */
export const logWorkerErrors = (
  worker: { readonly on: (event: "error", listener: (error: Error) => void) => unknown },
  connection: { readonly on: (event: "ready", listener: () => void) => unknown },
  queueName: QueueName,
  log: (effect: Effect.Effect<void>) => unknown
): void => {
  let previous: string | undefined
  connection.on("ready", () => {
    previous = undefined
  })
  worker.on("error", (error: unknown) => {
    const message = errorMessage(error)
    if (message === previous) return
    previous = message
    log(Effect.logWarning("BullMQ worker error").pipe(Effect.annotateLogs({ queue: queueName, error: message })))
  })
}

/**
 * The JobQueue on BullMQ (docs/architecture.md §7.1). One `Queue` per queue name on the shared command
 * connection; one `Worker` per `consume`, on its own blocking connection. Everything is scoped:
 * closing the layer's scope closes the queues, closing a consumer's scope closes its worker.
 *
 * Finished jobs (completed or failed) are removed at once, so the same AiJob id can be queued
 * again by a later dispatch; while a job is waiting, delayed or active, re-adding its id is a
 * no-op (BullMQ's custom job id).
 */
export const makeBullMqJobQueue = Effect.gen(function*() {
  const redis = yield* RedisConnection
  const settings = yield* QueueSettings
  const runtime = yield* Effect.runtime<never>()
  const runLog = Runtime.runFork(runtime)

  const openQueue = (name: QueueName) =>
    Effect.acquireRelease(
      Effect.sync(() => {
        const queue = new Queue<AiJobQueuePayloadEncoded>(name, {
          connection: redis.commands,
          prefix: redis.bullPrefix
        })
        // An EventEmitter 'error' without a listener would throw; the connection logs outages.
        queue.on("error", () => {})
        return queue
      }),
      (queue) => Effect.promise(() => queue.close()).pipe(Effect.timeoutOption(Duration.seconds(5)), Effect.asVoid)
    )

  const queues = {
    "ai-interactive": yield* openQueue("ai-interactive"),
    "ai-background": yield* openQueue("ai-background")
  } satisfies Record<QueueName, Queue<AiJobQueuePayloadEncoded>>

  /** What BullMQ is told for one request: the same for a single add and a bulk add. */
  const jobOptions = (request: JobQueueAddRequest) => {
    const setting = settings.queues[request.queueName]
    return {
      jobId: request.payload.dedupeKey,
      priority: queuePriorityFor(request.priority),
      delay: Math.max(0, Math.round(Duration.toMillis(request.delay ?? Duration.zero))),
      attempts: setting.attempts,
      backoff: { type: "exponential", delay: Duration.toMillis(setting.backoffDelay) },
      removeOnComplete: true,
      removeOnFail: true
    }
  }

  /**
   * An add whose outcome is unknown when it fails (it may still have run, or run later: ioredis
   * keeps an abandoned command). It stays interruptible so the timeout can abandon it even when
   * the caller runs uninterruptibly (a dispatcher finishing its batch on shutdown).
   */
  const adding = <A>(operation: string, timeout: Duration.Duration, run: () => Promise<A>) =>
    Effect.tryPromise({
      try: run,
      catch: (error) => new JobQueueUnavailable({ operation, message: errorMessage(error), outcomeUnknown: true })
    }).pipe(
      Effect.interruptible,
      Effect.timeoutFail({
        duration: timeout,
        onTimeout: () =>
          new JobQueueUnavailable({
            operation,
            message: `no answer from Redis within ${Duration.toMillis(timeout)} ms`,
            outcomeUnknown: true
          })
      })
    )

  const add = (request: JobQueueAddRequest) => {
    const queue = queues[request.queueName]
    return adding("add", request.timeout ?? settings.addTimeout, async () => {
      // `duplicate` is what the queue looked like just before the add: under a race both
      // callers may hear `added`, but BullMQ still keeps one job for the id. The EXISTS goes out
      // first on the same connection without being awaited, so Redis runs it before the add.
      const [existed] = await Promise.all([
        redis.commands.exists(queue.toKey(request.payload.dedupeKey)),
        queue.add(request.payload.jobType, encodeQueuePayload(request.payload), jobOptions(request))
      ])
      return existed === 1 ? ("duplicate" as const) : ("added" as const)
    })
  }

  // One pipeline per queue name (BullMQ's addBulk); the queues' pipelines go out together.
  const addBulk = (
    requests: ReadonlyArray<JobQueueAddRequest>,
    options: { readonly timeout?: Duration.Duration } = {}
  ) =>
    adding("addBulk", options.timeout ?? settings.addTimeout, () =>
      Promise.all(allQueueNames.map((queueName) => {
        const jobs = requests.filter((request) => request.queueName === queueName).map((request) => ({
          name: request.payload.jobType,
          data: encodeQueuePayload(request.payload),
          opts: jobOptions(request)
        }))
        return jobs.length === 0 ? Promise.resolve([]) : queues[queueName].addBulk(jobs)
      }))).pipe(Effect.asVoid)

  // Same connection as `add`, so this EXISTS runs after any add still waiting on it.
  const contains = (queueName: QueueName, queueJobId: string) =>
    Effect.tryPromise({
      try: () => redis.commands.exists(queues[queueName].toKey(queueJobId)),
      catch: unavailable("contains")
    }).pipe(
      Effect.interruptible,
      Effect.timeoutFail({
        duration: settings.addTimeout,
        onTimeout: () =>
          new JobQueueUnavailable({
            operation: "contains",
            message: `no answer from Redis within ${Duration.toMillis(settings.addTimeout)} ms`
          })
      }),
      Effect.map((found) => found === 1)
    )

  const counts = (queueName: QueueName) =>
    Effect.tryPromise({
      try: () => queues[queueName].getJobCounts("wait", "prioritized", "active", "delayed"),
      catch: unavailable("counts")
    }).pipe(
      Effect.interruptible,
      Effect.timeoutFail({
        duration: settings.addTimeout,
        onTimeout: () =>
          new JobQueueUnavailable({
            operation: "counts",
            message: `no answer from Redis within ${Duration.toMillis(settings.addTimeout)} ms`
          })
      }),
      Effect.map((c) => ({
        waiting: (c.wait ?? 0) + (c.prioritized ?? 0),
        active: c.active ?? 0,
        delayed: c.delayed ?? 0
      }))
    )

  const waitingStates: ReadonlySet<string> = new Set(["waiting", "prioritized", "delayed", "waiting-children"])

  const state = (queueName: QueueName, queueJobId: string) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.tryPromise({
        try: async (): Promise<QueueJobState> => {
          const job = await queues[queueName].getJob(queueJobId)
          if (job === undefined) return { _tag: "Gone" }
          const current = await job.getState()
          if (waitingStates.has(current)) return { _tag: "Waiting" }
          // `processedOn` is stamped when a worker takes the job.
          if (current === "active") return { _tag: "Active", activeSinceMs: job.processedOn ?? now }
          return { _tag: "Gone" }
        },
        catch: unavailable("state")
      })).pipe(
        Effect.interruptible,
        Effect.timeoutFail({
          duration: settings.addTimeout,
          onTimeout: () =>
            new JobQueueUnavailable({
              operation: "state",
              message: `no answer from Redis within ${Duration.toMillis(settings.addTimeout)} ms`
            })
        })
      )

  const consume = <E, R>(
    queueName: QueueName,
    handler: (delivery: JobDelivery) => Effect.Effect<void, E, R>,
    options: ConsumeOptions = {}
  ): Effect.Effect<void, JobQueueUnavailable, Scope.Scope | R> =>
    Effect.gen(function*() {
      const handlerRuntime = yield* Effect.runtime<R>()
      const setting = settings.queues[queueName]
      const connection = yield* redis.open("blocking")
      /** Set with the worker: a stopping consumer's first hand-back stops it taking deliveries. */
      let stopTaking = (): Promise<void> => Promise.resolve()

      const process = async (job: Job<unknown>, token: string | undefined, signal: AbortSignal | undefined) => {
        const queueJobId = job.id ?? "(none)"
        const decoded = decodeQueuePayloadEither(job.data)
        if (decoded._tag === "Left") {
          runLog(
            Effect.logError("Queue payload does not decode; job dropped, its row is left for the reaper").pipe(
              Effect.annotateLogs({ queue: queueName, queueJobId, invalidFields: payloadErrorPaths(decoded.left) })
            )
          )
          throw new UnrecoverableError("queue payload does not decode")
        }
        const deliverySignal = signal ?? new AbortController().signal
        const delivery: JobDelivery = {
          queueName,
          queueJobId,
          payload: decoded.right,
          attempt: job.attemptsMade + 1,
          maxAttempts: job.opts.attempts ?? setting.attempts,
          signal: deliverySignal
        }
        // The handler watches `delivery.signal` itself (the engine hands its job back when it
        // fires); interrupting its fiber from outside would skip that hand-off.
        const exit = await Runtime.runPromiseExit(handlerRuntime)(handler(delivery))
        if (Exit.isFailure(exit) && isStoppingHandOff(exit.cause)) {
          // Straight back to waiting (BullMQ's WaitingError: no attempt counted, no backoff), for
          // another worker: this one stops taking deliveries first, or it would take it again.
          await stopTaking()
          await job.moveToWait(token)
          runLog(
            Effect.logInfo("Queue delivery handed back by a stopping consumer; waiting again for another").pipe(
              Effect.annotateLogs({ queue: queueName, queueJobId, jobId: decoded.right.jobId })
            )
          )
          throw new WaitingError()
        }
        if (Exit.isFailure(exit)) {
          const reason = Cause.isInterruptedOnly(exit.cause)
            ? "interrupted"
            : Option.match(Cause.failureOption(exit.cause), {
              onNone: () => "defect",
              onSome: (error) =>
                // A give-back says why (the worker could not reach its database, say).
                error instanceof JobHandedOff
                  ? `JobHandedOff: ${error.reason}`
                  : typeof error === "object" && error !== null && "_tag" in error
                  ? String(error._tag)
                  : "failure"
            })
          runLog(
            Effect.logWarning("Queue delivery failed; the queue retries it while attempts remain").pipe(
              Effect.annotateLogs({
                queue: queueName,
                queueJobId,
                jobId: decoded.right.jobId,
                attempt: delivery.attempt,
                reason
              })
            )
          )
          throw new Error(`delivery failed: ${reason}`)
        }
      }

      const worker = yield* Effect.acquireRelease(
        Effect.sync(() => {
          const created = new Worker(queueName, process, {
            connection,
            prefix: redis.bullPrefix,
            concurrency: options.concurrency ?? setting.concurrency,
            lockDuration: Duration.toMillis(setting.lockDuration),
            removeOnComplete: { count: 0 },
            removeOnFail: { count: 0 },
            autorun: true
          })
          logWorkerErrors(created, connection, queueName, runLog)
          // Pausing without waiting for the active deliveries: they are being handed back too.
          stopTaking = () => created.pause(true)
          return created
        }),
        (worker) =>
          Effect.promise(() => worker.close()).pipe(
            Effect.timeoutOption(settings.shutdownGrace),
            Effect.flatMap(
              Option.match({
                onSome: () => Effect.void,
                onNone: () =>
                  Effect.gen(function*() {
                    yield* Effect.logWarning("Active deliveries outlived the shutdown grace; aborting them").pipe(
                      Effect.annotateLogs({ queue: queueName })
                    )
                    yield* Effect.sync(() => worker.cancelAllJobs("shutdown"))
                    yield* Effect.promise(() => worker.close()).pipe(Effect.timeoutOption(Duration.seconds(5)))
                  })
              })
            )
          )
      )
      yield* Effect.tryPromise({ try: () => worker.waitUntilReady(), catch: unavailable("consume") }).pipe(
        Effect.interruptible,
        Effect.timeoutFail({
          duration: settings.addTimeout,
          onTimeout: () =>
            new JobQueueUnavailable({
              operation: "consume",
              message: `no answer from Redis within ${Duration.toMillis(settings.addTimeout)} ms`
            })
        })
      )
    })

  yield* Effect.logDebug("BullMQ queues open").pipe(Effect.annotateLogs({ queues: allQueueNames.join(",") }))
  return JobQueue.of({ add, addBulk, consume, counts, contains, state })
})

/** JobQueue on BullMQ; needs `RedisConnection` and `QueueSettings`. */
export const BullMqJobQueueLive = Layer.scoped(JobQueue, makeBullMqJobQueue)
