import { Effect, Either } from "effect"
import { type AiJob, byLease } from "../domain/AiJob.js"
import { type ExecutionError, publicMessageOf } from "../domain/ExecutionError.js"
import { scrubSecrets } from "../domain/SecretScrubbing.js"
import { AiJobLifecycleRepository } from "../services/AiJobLifecycleRepository.js"
import { recordFinished, stageDuration, timed } from "../services/EngineMetrics.js"
import { jobEventOf, JobEvents } from "../services/JobEvents.js"
import { JobHandedOff } from "../services/JobQueue.js"
import { type PreparedJob, RunOutcome } from "./RunningJob.js"
import { stageSpan } from "./stageSpan.js"

/**
 * COMPLETE (docs/architecture.md §8.5): records how the run ended, fenced on this run's lease,
 * and publishes its terminal job event. Success was written by PROJECT; a failure is `markFailed`, a
 * cancel `markCancelled`; a lost lease writes nothing (the new owner will); a hand-off releases
 * the lease and fails with `JobHandedOff`, so the queue delivers the job again.
 */
export const complete = Effect.fnUntraced(
  function*(prepared: PreparedJob, outcome: RunOutcome) {
    const jobs = yield* AiJobLifecycleRepository
    const fence = byLease(prepared.lease)
    return yield* RunOutcome.$match(outcome, {
      Succeeded: ({ job }) => publishFinished(job),
      Failed: ({ calls, error }) =>
        Effect.flatMap(
          Effect.either(jobs.markFailed(fence, failureRecord(error, calls))),
          (failed) =>
            Either.match(failed, {
              onLeft: (refusal) =>
                Effect.logWarning("failure not recorded; the reaper will see the job").pipe(
                  Effect.annotateLogs({ reason: refusal._tag })
                ),
              onRight: (job) =>
                Effect.zipRight(
                  Effect.logWarning("job failed").pipe(Effect.annotateLogs({ errorCode: error.code })),
                  publishFinished(job)
                )
            })
        ),
      CancelRequested: () =>
        Effect.flatMap(Effect.either(jobs.markCancelled(fence)), (cancelled) =>
          Either.match(cancelled, {
            onLeft: (refusal) =>
              Effect.logInfo("cancel not applied: the job already ended").pipe(
                Effect.annotateLogs({ reason: refusal._tag })
              ),
            onRight: (job) => Effect.zipRight(Effect.logInfo("job cancelled"), publishFinished(job))
          })),
      LockLost: () => Effect.logWarning("lock lost: another worker owns the job; this run's work is dropped"),
      HandedOff: () =>
        Effect.flatMap(Effect.either(jobs.releaseLock(prepared.lease)), (released) =>
          Either.isLeft(released)
            ? Effect.void
            : Effect.zipRight(
              Effect.logInfo("job handed back: lock released for another worker"),
              Effect.fail(
                new JobHandedOff({ jobId: prepared.job.id, reason: "worker stopping", consumerStopping: true })
              )
            ))
    })
  },
  Effect.annotateLogs({ stage: "COMPLETE" }),
  timed(stageDuration, { stage: "complete" }),
  Effect.uninterruptible,
  stageSpan("pipeline.complete")
)

const failureRecord = (error: ExecutionError, calls: number) => ({
  errorCode: error.code,
  publicErrorMessage: publicMessageOf(error.code),
  // Messages are built without provider text; the scrub is the last guard before the column.
  internalErrorMessage: scrubSecrets(`${error._tag} ${error.code} after ${calls} provider call(s): ${error.message}`)
})

/**
 * The job event (and the metrics) of a job that reached a terminal state, after the commit (the
 * reaper publishes it too, for the jobs it ends).
 */
export const publishFinished = (job: AiJob) =>
  Effect.gen(function*() {
    if (
      job.lifecycleStatus !== "succeeded" && job.lifecycleStatus !== "failed" && job.lifecycleStatus !== "cancelled"
    ) return
    yield* recordFinished(job)
    yield* Effect.flatMap(JobEvents, (jobEvents) => jobEvents.publish(jobEventOf(job)))
  })
