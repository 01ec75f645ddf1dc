import { Cause, Clock, Effect, Either, Exit, Option } from "effect"
import { type AiJob, byLease } from "../domain/AiJob.js"
import { type ExecutionError, publicMessageOf } from "../domain/ExecutionError.js"
import { newId } from "../domain/Ids.js"
import { scrubSecrets } from "../domain/SecretScrubbing.js"
import { AiCostCalculator } from "../services/AiCostCalculator.js"
import type { GenerateResult } from "../services/AiGateway.js"
import { AiJobLifecycleRepository } from "../services/AiJobLifecycleRepository.js"
import { jobEventOf, JobEvents } from "../services/JobEvents.js"
import { JobHandedOff } from "../services/JobQueue.js"
import { type NewUsageLogEntry, UsageLog } from "../services/UsageLog.js"
import { type PreparedJob, type ResolvedJob, type ResolvedTarget, RunOutcome } from "./RunningJob.js"
import { recordFinished, stageDuration, timed } from "../services/EngineMetrics.js"

/**
 * COMPLETE (docs/architecture.md §8.5): records how the run ended, fenced on this run's lease,
 * and publishes its terminal job event. Success was written by PROJECT; a failure is `markFailed`, a
 * cancel `markCancelled`; a lost lease writes nothing (the new owner will); a hand-off releases
 * the lease and fails with `JobHandedOff`, so the queue delivers the job again.
 */
export const complete = Effect.fn("pipeline.complete", { captureStackTrace: false })(
  function* (prepared: PreparedJob, outcome: RunOutcome) {
    const jobs = yield* AiJobLifecycleRepository
    const fence = byLease(prepared.lease)
    return yield* RunOutcome.$match(outcome, {
      Succeeded: ({ job }) => publishFinished(job),
      Failed: ({ calls, error }) =>
        Effect.flatMap(Effect.either(jobs.markFailed(fence, failureRecord(error, calls))), (failed) =>
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
          })),
      CancelRequested: () =>
        Effect.flatMap(Effect.either(jobs.markCancelled(fence)), (cancelled) =>
          Either.match(cancelled, {
            onLeft: (refusal) =>
              Effect.logInfo("cancel not applied: the job already ended").pipe(Effect.annotateLogs({ reason: refusal._tag })),
            onRight: (job) => Effect.zipRight(Effect.logInfo("job cancelled"), publishFinished(job))
          })),
      LockLost: () => Effect.logWarning("lock lost: another worker owns the job; this run's work is dropped"),
      HandedOff: () =>
        Effect.flatMap(Effect.either(jobs.releaseLock(prepared.lease)), (released) =>
          Either.isLeft(released)
            ? Effect.void
            : Effect.zipRight(
              Effect.logInfo("job handed back: lock released for another worker"),
              Effect.fail(new JobHandedOff({ jobId: prepared.job.id, reason: "worker stopping", consumerStopping: true }))
            ))
    })
  },
  Effect.annotateLogs({ stage: "COMPLETE" }),
  timed(stageDuration, { stage: "complete" }),
  Effect.uninterruptible
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
  Effect.gen(function* () {
    if (job.lifecycleStatus !== "succeeded" && job.lifecycleStatus !== "failed" && job.lifecycleStatus !== "cancelled") return
    yield* recordFinished(job)
    yield* Effect.flatMap(JobEvents, (jobEvents) => jobEvents.publish(jobEventOf(job)))
  })

/**
 * The usage row of one provider call (docs/architecture.md §11.5), failed and interrupted calls
 * included (tokens 0, the error code set). EXECUTE builds it when the call ends. The row names the
 * target the call went to (the route's first by default) and the model the provider says answered;
 * the price is the target's model's, whatever name the provider reports.
 */
export const usageEntryOf = (
  resolved: ResolvedJob,
  attemptNo: number,
  startedAtMillis: number,
  exit: Exit.Exit<GenerateResult, ExecutionError>,
  target: ResolvedTarget = resolved.targets[0]
) =>
  Effect.gen(function* () {
    const costs = yield* AiCostCalculator
    const finishedAtMillis = yield* Clock.currentTimeMillis
    const result = Exit.isSuccess(exit) ? exit.value : undefined
    const usage = result?.usage ?? { promptTokens: 0, completionTokens: 0, totalTokens: 0 }
    const errorCode = Exit.isSuccess(exit) ? null : Exit.isInterrupted(exit) ? "CANCELLED" : failureCodeOf(exit)
    return {
      id: yield* newId,
      jobId: resolved.job.id,
      leaseNo: resolved.lease.leaseNo,
      attemptNo,
      credentialMode: target.credential.mode,
      provider: result?.provider ?? target.provider,
      model: result?.model ?? target.model,
      promptTokens: usage.promptTokens,
      completionTokens: usage.completionTokens,
      totalTokens: usage.totalTokens,
      costMicros: yield* costs.costMicros(target.model, usage),
      latencyMs: Math.max(0, Math.round(result?.latencyMs ?? finishedAtMillis - startedAtMillis)),
      errorCode,
      ...(result?.usageEstimated === true ? { usageEstimated: true } : {})
    } satisfies NewUsageLogEntry
  })

const failureCodeOf = (exit: Exit.Failure<GenerateResult, ExecutionError>): string =>
  Option.match(Cause.failureOption(exit.cause), { onNone: () => "INTERNAL_ERROR", onSome: (error) => error.code })

/**
 * Writes a usage row on its own, now: a failed or interrupted call's, or the successful call's
 * when its projection rolled back for good. One that cannot be written is logged and does not
 * fail the job: the call happened either way.
 */
export const recordUsage = (entry: NewUsageLogEntry) =>
  Effect.flatMap(UsageLog, (usageLog) => usageLog.record(entry)).pipe(
    Effect.catchAll((error) =>
      Effect.logWarning("usage row not written").pipe(Effect.annotateLogs({ operation: error.operation }))
    ),
    Effect.asVoid,
    Effect.uninterruptible
  )

/**
 * Writes the successful call's usage row inside the caller's transaction (PROJECT's): it commits
 * with the result or not at all, so a crash neither loses it nor counts it twice. A failure fails
 * the transaction.
 */
export const recordUsageWithResult = (entry: NewUsageLogEntry) =>
  Effect.flatMap(UsageLog, (usageLog) => usageLog.record(entry))
