import { Effect, Either, Schedule } from "effect"
import { byExpiredLock } from "../domain/AiJob.js"
import { publicMessageOf } from "../domain/ExecutionError.js"
import { AiJobLifecycleRepository } from "../services/AiJobLifecycleRepository.js"
import { SnapshotRepository } from "../services/SnapshotRepository.js"
import { TimingConfig } from "../layers/config.js"
import { publishFinished } from "./complete.js"
import { redispatch } from "./redispatch.js"

const batchSize = 100

/**
 * One pass of the lock reaper (ADR 1.7, DESIGN.md correction 5), over running jobs whose lock
 * expired more than `REAPER_GRACE_MS` ago: a requested cancel is carried out; a job with
 * attempts left is queued again (its next worker takes it over); a job without is failed as
 * `INTERNAL_WORKER_LOST`. Every write is fenced on the attempt the reaper saw and on the lock
 * still being expired, so a worker that comes back in time, or a second reaper, wins cleanly.
 * Then expired snapshots are deleted (ADR 8.4).
 */
export const reapOnce = Effect.gen(function* () {
  const jobs = yield* AiJobLifecycleRepository
  const snapshots = yield* SnapshotRepository
  const { reaperGraceMs } = yield* TimingConfig
  const expired = yield* jobs.findExpiredLocks(reaperGraceMs, batchSize)
  let cancelled = 0
  let requeued = 0
  let failed = 0
  for (const job of expired) {
    const fence = byExpiredLock(job, reaperGraceMs)
    if (job.cancelRequestedAt !== null) {
      const result = yield* Effect.either(jobs.markCancelled(fence))
      if (Either.isRight(result)) {
        cancelled += 1
        yield* publishFinished(result.right)
      }
    } else if (job.attemptCount < job.maxAttempts) {
      const written = yield* redispatch(job)
      if (!written.duplicate) requeued += 1
    } else {
      const result = yield* Effect.either(
        jobs.markFailed(fence, {
          errorCode: "INTERNAL_WORKER_LOST",
          publicErrorMessage: publicMessageOf("INTERNAL_WORKER_LOST"),
          internalErrorMessage: `lock held by ${job.lockedBy ?? "nobody"} expired; ${job.attemptCount} of ${job.maxAttempts} attempts used`
        })
      )
      if (Either.isRight(result)) {
        failed += 1
        yield* publishFinished(result.right)
      }
    }
  }
  const snapshotsDeleted = yield* snapshots.deleteExpired(500)
  if (cancelled + requeued + failed + snapshotsDeleted > 0) {
    yield* Effect.logInfo("reaper pass").pipe(Effect.annotateLogs({ cancelled, requeued, failed, snapshotsDeleted }))
  }
  return { cancelled, requeued, failed, snapshotsDeleted }
}).pipe(Effect.annotateLogs({ stage: "REAPER" }), Effect.withSpan("reaper.pass"))

/** The reaper as a background loop, every `REAPER_INTERVAL_MS`; a failed pass is logged, not fatal. */
export const runReaper = Effect.gen(function* () {
  const { reaperIntervalMs } = yield* TimingConfig
  yield* reapOnce.pipe(
    Effect.catchAll((error) =>
      Effect.logWarning("reaper pass failed; trying again next interval").pipe(Effect.annotateLogs({ error: error.message }))
    ),
    Effect.repeat(Schedule.spaced(reaperIntervalMs))
  )
})
