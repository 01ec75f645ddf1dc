import { type Duration, Schema } from "effect"
import { CredentialMode } from "./CredentialMode.js"
import { LegacyStatus, LifecycleStatus } from "./LifecycleStatus.js"
import { QueueName } from "./QueueName.js"

/** One row of `ai_job`, as the engine sees it. */
export class AiJob extends Schema.Class<AiJob>("AiJob")({
  id: Schema.String,
  userId: Schema.String,
  jobType: Schema.String,
  targetType: Schema.String,
  targetId: Schema.String,
  idempotencyKey: Schema.NullOr(Schema.String),
  /** SHA-256 of the request the idempotency key was first used with; null on older rows. */
  requestHash: Schema.NullOr(Schema.String),
  status: LegacyStatus,
  lifecycleStatus: LifecycleStatus,
  queueName: QueueName,
  priority: Schema.Number,
  progress: Schema.Number,
  input: Schema.Unknown,
  credentialMode: CredentialMode,
  credentialId: Schema.NullOr(Schema.String),
  promptVersion: Schema.String,
  inputSchemaVersion: Schema.String,
  outputSchemaVersion: Schema.String,
  /** Attempts used: the first lock and each takeover of a crashed worker's lock; a hand-off uses none. */
  attemptCount: Schema.Number,
  maxAttempts: Schema.Number,
  /** How many times a worker has locked the job (hand-offs included): the fencing token. */
  leaseNo: Schema.Number,
  lockedBy: Schema.NullOr(Schema.String),
  lockedAt: Schema.NullOr(Schema.DateFromSelf),
  lockUntil: Schema.NullOr(Schema.DateFromSelf),
  cancelRequestedAt: Schema.NullOr(Schema.DateFromSelf),
  startedAt: Schema.NullOr(Schema.DateFromSelf),
  finishedAt: Schema.NullOr(Schema.DateFromSelf),
  errorCode: Schema.NullOr(Schema.String),
  publicErrorMessage: Schema.NullOr(Schema.String),
  internalErrorMessage: Schema.NullOr(Schema.String),
  outputHash: Schema.NullOr(Schema.String),
  /** The creating request's W3C `traceparent`; a malformed one is ignored where used, never fails a read. */
  traceParent: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }),
  /** The job an operator's retry re-created this one from; null for a job a client created. */
  retriedFromJobId: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
}) {}

/** What `AiJobLifecycleRepository.createJob` inserts; the repository sets status, clocks and counters. */
export interface NewAiJob {
  readonly id: string
  readonly userId: string
  readonly jobType: string
  readonly targetType: string
  readonly targetId: string
  readonly idempotencyKey: string | null
  readonly requestHash: string | null
  readonly queueName: QueueName
  readonly priority: number
  readonly input: unknown
  readonly credentialMode: CredentialMode
  readonly credentialId: string | null
  readonly promptVersion: string
  readonly inputSchemaVersion: string
  readonly outputSchemaVersion: string
  readonly maxAttempts: number
  readonly traceParent?: string | null
  readonly retriedFromJobId?: string | null
}

/**
 * What a worker presents with every write to a running job (docs/architecture.md §4.6). Every
 * lock, takeover or pickup after a hand-off raises `leaseNo`, fencing out the previous holder; a
 * hand-off keeps `attempt`.
 */
export interface JobLease {
  readonly jobId: string
  readonly workerId: string
  readonly attempt: number
  readonly leaseNo: number
}

export const leaseOf = (job: AiJob): JobLease | undefined =>
  job.lifecycleStatus === "running" && job.lockedBy !== null
    ? { jobId: job.id, workerId: job.lockedBy, attempt: job.attemptCount, leaseNo: job.leaseNo }
    : undefined

/**
 * Who may end a running job: the lease holder, or the reaper once the lock has been expired past
 * the grace period and the lease number and owner are still the ones it saw.
 */
export type JobFence =
  | { readonly _tag: "Lease"; readonly lease: JobLease }
  | {
    readonly _tag: "ExpiredLock"
    readonly jobId: string
    readonly attempt: number
    readonly leaseNo: number
    readonly lockedBy: string | null
    readonly grace: Duration.Duration
  }

export const byLease = (lease: JobLease): JobFence => ({ _tag: "Lease", lease })
export const byExpiredLock = (job: AiJob, grace: Duration.Duration): JobFence => ({
  _tag: "ExpiredLock",
  jobId: job.id,
  attempt: job.attemptCount,
  leaseNo: job.leaseNo,
  lockedBy: job.lockedBy,
  grace
})

/** A job whose last holder released it (a hand-off): the next lease costs no attempt. */
export const isHandedOff = (job: AiJob): boolean => job.lifecycleStatus === "running" && job.lockedBy === null
export const fencedJobId = (fence: JobFence): string => (fence._tag === "Lease" ? fence.lease.jobId : fence.jobId)

export interface JobFailure {
  readonly errorCode: string
  readonly publicErrorMessage: string
  readonly internalErrorMessage: string
}

/** Filters shared by the user's and the operator's job lists. */
export interface JobListFilter {
  readonly userId?: string | undefined
  readonly jobType?: string | undefined
  readonly statuses?: ReadonlyArray<LifecycleStatus> | undefined
  readonly queueName?: QueueName | undefined
  readonly createdFrom?: Date | undefined
  readonly createdTo?: Date | undefined
}

/** Keyset position in a newest-first list: the last item the caller saw. */
export interface JobListCursor {
  readonly createdAt: Date
  readonly id: string
}
