import { Clock, Duration, Effect, Either, Schedule } from "effect"
import { TimingConfig } from "../config/EngineConfig.js"
import { byExpiredLock } from "../domain/AiJob.js"
import { publicMessageOf } from "../domain/ExecutionError.js"
import { AiJobLifecycleRepository } from "../services/AiJobLifecycleRepository.js"
import { increment, reaperActions } from "../services/EngineMetrics.js"
import { JobQueue, type QueueJobState } from "../services/JobQueue.js"
import { OutboxSignal } from "../services/outbox/OutboxSignal.js"
import { SnapshotRepository } from "../services/SnapshotRepository.js"
import { UnitOfWork } from "../services/UnitOfWork.js"
import { publishFinished } from "./complete.js"
import { queueJobIdsOf, redispatch, requeue } from "./outbox/redispatch.js"

const batchSize = 100

/** One job's trouble (a storage error) is logged and the pass goes on with the next. */
const skipOnFailure = (jobId: string) => <A, E extends { readonly message: string }, R>(self: Effect.Effect<A, E, R>) =>
  self.pipe(
    Effect.catchAll((error) =>
      Effect.as(
        Effect.logWarning("reaper skipped a job this pass").pipe(Effect.annotateLogs({ jobId, error: error.message })),
        undefined
      )
    )
  )

/**
 * One pass of the lock reaper (docs/architecture.md §12.1) over running jobs whose lock expired
 * past the grace: cancelled, queued again, or failed as `INTERNAL_WORKER_LOST`. Every write is
 * fenced on the lease it saw and the lock still expired, so a worker that comes back in time, or a
 * second reaper, wins cleanly. Then stale queued jobs are requeued and expired snapshots deleted.
 */
export const reapOnce = Effect.gen(function*() {
  const jobs = yield* AiJobLifecycleRepository
  const snapshots = yield* SnapshotRepository
  const unitOfWork = yield* UnitOfWork
  const signal = yield* OutboxSignal
  const queue = yield* JobQueue
  const timing = yield* TimingConfig
  const expired = yield* jobs.findExpiredLocks(timing.reaperGrace, batchSize)
  // The redispatch window is a number of whole periods since the epoch.
  const window = Math.floor((yield* Clock.currentTimeMillis) / Duration.toMillis(timing.queuedRedispatchAfter))
  let cancelled = 0
  let requeued = 0
  let failed = 0
  for (const job of expired) {
    yield* Effect.gen(function*() {
      const fence = byExpiredLock(job, timing.reaperGrace)
      if (job.cancelRequestedAt !== null) {
        const result = yield* Effect.either(jobs.markCancelled(fence))
        if (Either.isRight(result)) {
          cancelled += 1
          yield* publishFinished(result.right)
        }
      } else if (job.lockedBy === null || job.attemptCount < job.maxAttempts) {
        // Attempts left, or given back by a hand-off (which costs none): queue it again.
        const written = yield* redispatch(job, window)
        if (!written.duplicate) requeued += 1
      } else {
        const result = yield* Effect.either(
          jobs.markFailed(fence, {
            errorCode: "INTERNAL_WORKER_LOST",
            publicErrorMessage: publicMessageOf("INTERNAL_WORKER_LOST"),
            internalErrorMessage: `lock held by ${
              job.lockedBy ?? "nobody"
            } expired; ${job.attemptCount} of ${job.maxAttempts} attempts used`
          })
        )
        if (Either.isRight(result)) {
          failed += 1
          yield* publishFinished(result.right)
        }
      }
    }).pipe(skipOnFailure(job.id))
  }
  // A queued job that nobody touched for long may have lost its delivery (dropped by the queue
  // after its attempts, lost with a Redis that restarted empty, acknowledged by a worker that
  // could not reach the database, or taken by a worker that died before PREPARE: active for a
  // whole lease without locking the job). One merely waiting in a backlog is not: the queue is
  // asked first, and such a job is only marked as looked after (no second delivery).
  const now = yield* Clock.currentTimeMillis
  const stillDelivering = (state: QueueJobState) =>
    state._tag === "Waiting" ||
    (state._tag === "Active" && now - state.activeSinceMs < Duration.toMillis(timing.jobLockTtl))
  const stale = yield* jobs.findStaleQueued(timing.queuedRedispatchAfter, batchSize)
  let requeuedQueued = 0
  let stillPending = 0
  for (const job of stale) {
    const outcome = yield* Effect.gen(function*() {
      const pending = yield* Effect.exists(
        queueJobIdsOf(job, window),
        (id) => Effect.map(queue.state(job.queueName, id), stillDelivering)
      )
      return yield* unitOfWork.transaction(
        Effect.flatMap(
          jobs.touchQueued(job),
          (touched) =>
            !touched
              ? Effect.succeed("changed" as const)
              : pending
              ? Effect.succeed("pending" as const)
              : Effect.as(requeue(job, window), "requeued" as const)
        )
      )
    }).pipe(skipOnFailure(job.id))
    if (outcome === "requeued") requeuedQueued += 1
    if (outcome === "pending") stillPending += 1
  }
  if (requeuedQueued > 0) yield* signal.notify
  const snapshotsDeleted = yield* snapshots.deleteExpired(500)
  if (cancelled + requeued + failed + requeuedQueued + snapshotsDeleted > 0) {
    yield* Effect.logInfo("reaper pass").pipe(
      Effect.annotateLogs({ cancelled, requeued, failed, requeuedQueued, stillPending, snapshotsDeleted })
    )
  }
  const actions = { cancelled, requeued, failed, requeued_queued: requeuedQueued, snapshots_deleted: snapshotsDeleted }
  for (const [action, count] of Object.entries(actions)) {
    if (count > 0) yield* increment(reaperActions, { action }, count)
  }
  return { cancelled, requeued, failed, requeuedQueued, snapshotsDeleted }
}).pipe(Effect.annotateLogs({ stage: "REAPER" }), Effect.withSpan("pipeline.reaper"))

/** The reaper as a background loop, every `REAPER_INTERVAL_MS`; a failed pass is logged, not fatal. */
export const runReaper = Effect.gen(function*() {
  const { reaperInterval } = yield* TimingConfig
  // Whatever a pass meets, failure or defect, the loop goes on: the reaper is the safety net.
  yield* reapOnce.pipe(
    Effect.catchAllCause((cause) => Effect.logWarning("reaper pass failed; trying again next interval", cause)),
    Effect.repeat(Schedule.spaced(reaperInterval))
  )
})
