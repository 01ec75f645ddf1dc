import { Duration, Either, Option } from "effect"
import type { AiJob, JobFence, JobLease } from "./AiJob.js"
import {
  AttemptsExhausted,
  CancelRequestedBeforeSuccess,
  IllegalTransition,
  JobAlreadyCancelled,
  JobLockConflict,
  JobNotCancellable,
  JobNotFound,
  LockLost
} from "./LifecycleErrors.js"
import type { LifecycleStatus } from "./LifecycleStatus.js"

/**
 * The preconditions of every lifecycle write, as pure functions of the row. The memory store
 * checks them before writing; MySQL states the same conditions in its `WHERE` clause and, when
 * no row matched, asks these functions why, so both backings refuse with the same error.
 */

type Guard<E> = Either.Either<AiJob, E | JobNotFound>

const found = (jobId: string, current: Option.Option<AiJob>): Either.Either<AiJob, JobNotFound> =>
  Option.match(current, {
    onNone: () => Either.left(new JobNotFound({ jobId })),
    onSome: Either.right
  })

const lockExpired = (job: AiJob, now: Date, grace: Duration.Duration = Duration.zero): boolean =>
  job.lockUntil === null || job.lockUntil.getTime() < now.getTime() - Duration.toMillis(grace)

export const lockGuard = (jobId: string, current: Option.Option<AiJob>): Guard<IllegalTransition | JobLockConflict> =>
  Either.flatMap(found(jobId, current), (job): Guard<IllegalTransition | JobLockConflict> => {
    switch (job.lifecycleStatus) {
      case "queued":
        return Either.right(job)
      case "running":
        return Either.left(new JobLockConflict({ jobId }))
      default:
        return Either.left(new IllegalTransition({ jobId, from: job.lifecycleStatus, to: "running" }))
    }
  })

export const takeOverGuard = (
  jobId: string,
  current: Option.Option<AiJob>,
  now: Date
): Guard<IllegalTransition | JobLockConflict | AttemptsExhausted> =>
  Either.flatMap(found(jobId, current), (job): Guard<IllegalTransition | JobLockConflict | AttemptsExhausted> => {
    if (job.lifecycleStatus === "queued") return Either.left(new JobLockConflict({ jobId }))
    if (job.lifecycleStatus !== "running") {
      return Either.left(new IllegalTransition({ jobId, from: job.lifecycleStatus, to: "running" }))
    }
    // Released by a hand-off: free at once, and the next lease continues the same attempt.
    if (job.lockedBy === null) return Either.right(job)
    if (!lockExpired(job, now)) return Either.left(new JobLockConflict({ jobId }))
    if (job.attemptCount >= job.maxAttempts) {
      return Either.left(new AttemptsExhausted({ jobId, attempts: job.attemptCount }))
    }
    return Either.right(job)
  })

/** The lease still holds: the job is running, under this owner, in this lease. */
export const leaseGuard = (
  lease: JobLease,
  current: Option.Option<AiJob>,
  to: LifecycleStatus
): Guard<IllegalTransition | LockLost> =>
  Either.flatMap(found(lease.jobId, current), (job): Guard<IllegalTransition | LockLost> => {
    if (job.lifecycleStatus !== "running") {
      return Either.left(new IllegalTransition({ jobId: job.id, from: job.lifecycleStatus, to }))
    }
    if (job.lockedBy !== lease.workerId || job.leaseNo !== lease.leaseNo) {
      return Either.left(new LockLost({ jobId: job.id, workerId: lease.workerId, attempt: lease.attempt }))
    }
    return Either.right(job)
  })

/**
 * A cancellable job (`honourCancel`) cannot succeed once a cancel was requested: the database
 * decides whether the cancel or the result came first.
 */
export const noCancelRequested =
  (honourCancel: boolean) => (job: AiJob): Either.Either<AiJob, CancelRequestedBeforeSuccess> =>
    honourCancel && job.cancelRequestedAt !== null
      ? Either.left(new CancelRequestedBeforeSuccess({ jobId: job.id }))
      : Either.right(job)

export const succeedGuard = (
  lease: JobLease,
  current: Option.Option<AiJob>,
  honourCancel: boolean
): Guard<IllegalTransition | LockLost | CancelRequestedBeforeSuccess> =>
  Either.flatMap(leaseGuard(lease, current, "succeeded"), noCancelRequested(honourCancel))

export const reaperWorkerId = "reaper"

/**
 * The reaper's fence: still the lease and owner it saw (no takeover, no hand-off since), and the
 * lock expired beyond the grace period.
 */
export const fenceGuard = (
  fence: JobFence,
  current: Option.Option<AiJob>,
  now: Date,
  to: LifecycleStatus
): Guard<IllegalTransition | LockLost> => {
  if (fence._tag === "Lease") return leaseGuard(fence.lease, current, to)
  return Either.flatMap(found(fence.jobId, current), (job): Guard<IllegalTransition | LockLost> => {
    if (job.lifecycleStatus !== "running") {
      return Either.left(new IllegalTransition({ jobId: job.id, from: job.lifecycleStatus, to }))
    }
    if (job.leaseNo !== fence.leaseNo || job.lockedBy !== fence.lockedBy || !lockExpired(job, now, fence.grace)) {
      return Either.left(new LockLost({ jobId: job.id, workerId: reaperWorkerId, attempt: fence.attempt }))
    }
    return Either.right(job)
  })
}

/** `running → cancelled` only once a cancel was requested. */
export const cancelGuard = (
  fence: JobFence,
  current: Option.Option<AiJob>,
  now: Date
): Guard<IllegalTransition | LockLost> =>
  Either.flatMap(
    fenceGuard(fence, current, now, "cancelled"),
    (job): Guard<IllegalTransition | LockLost> =>
      job.cancelRequestedAt === null
        ? Either.left(new IllegalTransition({ jobId: job.id, from: "running", to: "cancelled" }))
        : Either.right(job)
  )

export const requestCancelGuard = (
  jobId: string,
  current: Option.Option<AiJob>
): Guard<JobNotCancellable | JobAlreadyCancelled> =>
  Either.flatMap(found(jobId, current), (job): Guard<JobNotCancellable | JobAlreadyCancelled> => {
    switch (job.lifecycleStatus) {
      case "cancelled":
        return Either.left(new JobAlreadyCancelled({ jobId }))
      case "succeeded":
      case "failed":
        return Either.left(new JobNotCancellable({ jobId, status: job.lifecycleStatus }))
      default:
        return Either.right(job)
    }
  })

export const cancelledFailure = {
  errorCode: "CANCELLED",
  publicErrorMessage: "The job was cancelled."
} as const
