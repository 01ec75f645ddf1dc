import { Schema } from "effect"
import { LifecycleStatus } from "./LifecycleStatus.js"

/** The job does not exist (or, at the API, is not the caller's). */
export class JobNotFound extends Schema.TaggedError<JobNotFound>()("JobNotFound", {
  jobId: Schema.String
}) {}

/** A transition the state machine forbids. No row was changed. */
export class IllegalTransition extends Schema.TaggedError<IllegalTransition>()("IllegalTransition", {
  jobId: Schema.String,
  from: LifecycleStatus,
  to: LifecycleStatus
}) {
  override get message() {
    return `job ${this.jobId}: ${this.from} → ${this.to} is not an allowed transition`
  }
}

/** Another worker won the compare-and-set on the lock. */
export class JobLockConflict extends Schema.TaggedError<JobLockConflict>()("JobLockConflict", {
  jobId: Schema.String
}) {}

/**
 * The caller no longer holds the lock it presents (it expired and was taken over, or the job left
 * `running`). Whatever it was about to write must not land.
 */
export class LockLost extends Schema.TaggedError<LockLost>()("LockLost", {
  jobId: Schema.String,
  workerId: Schema.String,
  attempt: Schema.Number
}) {}

/** A cancel on a job that has already ended. */
export class JobNotCancellable extends Schema.TaggedError<JobNotCancellable>()("JobNotCancellable", {
  jobId: Schema.String,
  status: LifecycleStatus
}) {}

export class JobAlreadyCancelled extends Schema.TaggedError<JobAlreadyCancelled>()("JobAlreadyCancelled", {
  jobId: Schema.String
}) {}

/** A takeover found the job already used every attempt it had; the reaper will fail it. */
export class AttemptsExhausted extends Schema.TaggedError<AttemptsExhausted>()("AttemptsExhausted", {
  jobId: Schema.String,
  attempts: Schema.Number
}) {}

/** A cancellable job's success found a cancel already requested: nothing was written; the run ends cancelled. */
export class CancelRequestedBeforeSuccess extends Schema.TaggedError<CancelRequestedBeforeSuccess>()(
  "CancelRequestedBeforeSuccess",
  { jobId: Schema.String }
) {}
