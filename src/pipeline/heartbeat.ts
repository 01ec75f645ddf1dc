import { type Data, DateTime, Effect } from "effect"
import type { JobLease } from "../domain/AiJob.js"
import { stageOf } from "../domain/JobEvent.js"
import { AiJobLifecycleRepository, clampProgress } from "../services/AiJobLifecycleRepository.js"
import { JobEvents } from "../services/JobEvents.js"
import { RunOutcome } from "./RunningJob.js"

/** Why the heartbeat stopped the work: the run's outcome, for COMPLETE to record. */
export type HeartbeatVerdict = Data.TaggedEnum.Value<RunOutcome, "CancelRequested" | "LockLost">

/**
 * The lease's heartbeat (docs/architecture.md §4.3): every `heartbeatMs` it extends the fenced
 * lock and reports the work's progress in the same write. It ends with a verdict when the lock
 * is lost (another worker took over, or the job left `running`) or when a cancel was requested;
 * a storage error is logged and the next beat tries again (the lease outlives a few missed
 * beats, and fencing covers the rest).
 */
export const heartbeat = (
  lease: JobLease,
  options: {
    readonly heartbeatMs: number
    readonly lockTtlMs: number
    /** The progress the work reached; each beat carries it to the job row. */
    readonly progress: Effect.Effect<number>
    /** False for a job type that cannot be cancelled: a request is then ignored and beats go on. */
    readonly honourCancel: boolean
  }
) =>
  Effect.gen(function* () {
    const jobs = yield* AiJobLifecycleRepository
    const events = yield* JobEvents
    let announced = -1
    while (true) {
      yield* Effect.sleep(options.heartbeatMs)
      const progress = clampProgress(yield* options.progress)
      const beat = yield* jobs.extendLock(lease, options.lockTtlMs, progress).pipe(
        // The progress this beat committed, announced once per value.
        Effect.tap(() => {
          if (progress <= announced) return Effect.void
          announced = progress
          return Effect.flatMap(DateTime.now, (at) =>
            events.publish({
              jobId: lease.jobId,
              lifecycleStatus: "running",
              progress,
              stage: stageOf({ lifecycleStatus: "running", progress }),
              attempt: lease.attempt,
              at
            }))
        }),
        Effect.map((extension): HeartbeatVerdict | "alive" =>
          extension.cancelRequested && options.honourCancel ? RunOutcome.CancelRequested() : "alive"
        ),
        Effect.catchTags({
          LockLost: () => Effect.succeed(RunOutcome.LockLost()),
          PersistenceError: (error) =>
            Effect.as(
              Effect.logWarning("heartbeat could not extend the lock").pipe(Effect.annotateLogs({ operation: error.operation })),
              "alive" as const
            )
        })
      )
      if (beat !== "alive") return beat
    }
  }).pipe(Effect.annotateLogs({ stage: "HEARTBEAT" }))
