import { Chunk, Clock, Duration, Effect, Layer, Schedule, Stream } from "effect"
import { hostname } from "node:os"
import { WorkerSettings } from "../config/WorkerSettings.js"
import type { QueueName } from "../domain/QueueName.js"
import { JobQueue } from "../services/JobQueue.js"
import { WorkerDirectory } from "../services/WorkerDirectory.js"
import { makeExecutionEngine } from "./engine.js"
import { runReaper } from "./reaper.js"

/** A worker refreshes its presence key (TTL 90 s) every 30 s: two missed beats do not declare it gone. */
const directoryBeat = Duration.seconds(30)
/** The changes to the running set within this span make one beat. */
const directoryCoalesce = Duration.millis(250)

/**
 * A worker (docs/architecture.md §7.4) consumes its queues and hands each delivery to its
 * engine, keeps its heartbeat in the worker directory, and on shutdown (closing its scope) gives
 * its running jobs back before the consumers close, so other workers take them at once.
 */
export const runWorker = (options: { readonly workerId: string; readonly queues: ReadonlyArray<QueueName> }) =>
  Effect.gen(function*() {
    const queue = yield* JobQueue
    const directory = yield* WorkerDirectory
    const engine = yield* makeExecutionEngine(options.workerId)
    const startedAt = new Date(yield* Clock.currentTimeMillis).toISOString()

    for (const queueName of options.queues) {
      yield* queue.consume(queueName, engine.run)
    }
    // Finalizers run last-added first: hand the jobs back, then the consumers close.
    yield* Effect.addFinalizer(() =>
      Effect.zipRight(engine.handOffAll, directory.remove(options.workerId)).pipe(
        Effect.zipLeft(Effect.logInfo("worker stopping: running jobs handed back"))
      )
    )
    const beat = Effect.gen(function*() {
      yield* directory.beat({
        instanceId: options.workerId,
        hostname: hostname(),
        pid: process.pid,
        queues: options.queues,
        jobIds: yield* engine.runningJobIds,
        startedAt,
        beatAt: new Date(yield* Clock.currentTimeMillis).toISOString()
      })
    })
    yield* Effect.forkScoped(Effect.repeat(beat, Schedule.spaced(directoryBeat)))
    // Locks and releases show within `directoryCoalesce`, not at the next periodic beat: one
    // beat per change carried every running id, which at hundreds of jobs in flight cost more than the jobs.
    yield* Effect.forkScoped(
      Stream.drop(engine.runningChanges, 1).pipe(
        Stream.groupedWithin(Number.MAX_SAFE_INTEGER, directoryCoalesce),
        Stream.filter(Chunk.isNonEmpty),
        Stream.runForEach(() => beat)
      )
    )
    yield* Effect.logInfo("worker started").pipe(
      Effect.annotateLogs({ workerId: options.workerId, queues: options.queues.join(",") })
    )
    return engine
  })

/**
 * A worker process's work as a layer: a worker on `WORKER_QUEUES` under `WORKER_ID` (or a
 * fresh id), and the lock reaper beside it (safe in every process: its writes are fenced).
 */
export const WorkerServiceLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const { queues, workerId } = yield* WorkerSettings
    yield* runWorker({ workerId, queues })
    yield* Effect.forkScoped(runReaper)
  })
)
