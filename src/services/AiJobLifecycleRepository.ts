import { Context, type Duration, type Effect, type Option } from "effect"
import type { AiJob, JobFailure, JobFence, JobLease, JobListCursor, JobListFilter, NewAiJob } from "../domain/AiJob.js"
import type { JobBatchRecord } from "../domain/JobBatch.js"
import type { DuplicateIdempotencyKey } from "../domain/JobCreationErrors.js"
import type { FinishedArtifact } from "../domain/JobFinishedEvent.js"
import type { JobSnapshot } from "../domain/JobSnapshot.js"
import type {
  AttemptsExhausted,
  CancelRequestedBeforeSuccess,
  IllegalTransition,
  JobAlreadyCancelled,
  JobLockConflict,
  JobNotCancellable,
  JobNotFound,
  LockLost
} from "../domain/LifecycleErrors.js"
import { legacyStatusOf, type LifecycleStatus } from "../domain/LifecycleStatus.js"
import type { PersistenceError } from "../domain/PersistenceError.js"
import type { QueueName } from "../domain/QueueName.js"

export type TerminalWriteError = JobNotFound | IllegalTransition | LockLost | PersistenceError

/**
 * A new job's row, all but the two times the store's clock stamps (`createdAt`, `updatedAt`):
 * `queued`, never locked, no attempt used. Both stores insert exactly this.
 */
export const queuedJobFields = (job: NewAiJob): Omit<AiJob, "createdAt" | "updatedAt"> => ({
  id: job.id,
  userId: job.userId,
  jobType: job.jobType,
  targetType: job.targetType,
  targetId: job.targetId,
  idempotencyKey: job.idempotencyKey,
  requestHash: job.requestHash,
  status: legacyStatusOf.queued,
  lifecycleStatus: "queued",
  queueName: job.queueName,
  priority: job.priority,
  progress: 0,
  input: job.input,
  credentialMode: job.credentialMode,
  credentialId: job.credentialId,
  promptVersion: job.promptVersion,
  inputSchemaVersion: job.inputSchemaVersion,
  outputSchemaVersion: job.outputSchemaVersion,
  attemptCount: 0,
  maxAttempts: job.maxAttempts,
  leaseNo: 0,
  lockedBy: null,
  lockedAt: null,
  lockUntil: null,
  cancelRequestedAt: null,
  startedAt: null,
  finishedAt: null,
  errorCode: null,
  publicErrorMessage: null,
  internalErrorMessage: null,
  outputHash: null,
  traceParent: job.traceParent ?? null,
  retriedFromJobId: job.retriedFromJobId ?? null
})

/** `markSucceeded`'s options: the job as the lease locked it, the cancel rule and the projection's artifacts. */
export interface MarkSucceededOptions {
  readonly locked: AiJob
  readonly honourCancel?: boolean
  readonly artifacts?: ReadonlyArray<FinishedArtifact>
}

/** One delivery's ask of `lockQueued`: the job, if it is still queued and of this type. */
export interface QueuedLockRequest {
  readonly jobId: string
  readonly jobType: string
}

/** A job `lockQueued` locked, with its input snapshot (none once it expired or was never written). */
export interface LockedWithSnapshot {
  readonly job: AiJob
  readonly snapshot: Option.Option<JobSnapshot>
}

/** One lease a worker process holds, as its lease keeper extends it on a beat. */
export interface HeldLease {
  readonly lease: JobLease
  /** Carried to the row with the extension (raised, never lowered). */
  readonly progress: number
  /** Report a requested cancel as `CancelRequested` (a cancellable type whose run has not heard of it yet). */
  readonly reportCancel: boolean
}

/**
 * What a beat found for one held lease: still held and extended; held, extended, and a cancel
 * was requested (only for `reportCancel`); or lost (another owner, or the job left `running`).
 */
export type LeaseBeat = "Extended" | "CancelRequested" | "Lost"

/** A whole percentage in 0..100; anything not a finite number is 0 (progress only ever rises, so 0 changes nothing). */
export const clampProgress = (progress: number): number =>
  Number.isFinite(progress) ? Math.max(0, Math.min(100, Math.round(progress))) : 0

/**
 * The only code that writes `lifecycle_status` and its legacy `status` shadow (docs/architecture.md §3.3).
 * Lock times come from the store's clock (MySQL's `UTC_TIMESTAMP(3)`, Effect's Clock in memory), never a
 * worker's wall clock, so workers with skewed clocks still agree on who holds a lock.
 *
 * Every write that ends a job writes its terminal outbox event in the same transaction (the caller's
 * when one is open): a terminal state never exists without its event, nor an event without its state.
 */
export class AiJobLifecycleRepository extends Context.Tag("ai-job-engine/AiJobLifecycleRepository")<
  AiJobLifecycleRepository,
  {
    /** Call inside `UnitOfWork.transaction` beside its outbox event, so neither commits without the other. */
    readonly createJob: (job: NewAiJob) => Effect.Effect<AiJob, DuplicateIdempotencyKey | PersistenceError>
    /**
     * A batch create: the jobs, in the order given, in a few multi-row writes instead of one per
     * job. Call inside `UnitOfWork.transaction`, beside their snapshots and outbox events.
     */
    readonly createJobs: (
      jobs: ReadonlyArray<NewAiJob>
    ) => Effect.Effect<ReadonlyArray<AiJob>, DuplicateIdempotencyKey | PersistenceError>
    readonly findById: (jobId: string) => Effect.Effect<Option.Option<AiJob>, PersistenceError>
    /** The jobs with these ids, in the order given; an id without a job is left out. */
    readonly findByIds: (jobIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<AiJob>, PersistenceError>
    /**
     * Records which jobs a batch made under its idempotency key, inside the batch's transaction;
     * `DuplicateIdempotencyKey` when the key already names a batch of this user and job type.
     */
    readonly recordBatch: (batch: JobBatchRecord) => Effect.Effect<void, DuplicateIdempotencyKey | PersistenceError>
    readonly findBatchByIdempotencyKey: (
      userId: string,
      jobType: string,
      idempotencyKey: string
    ) => Effect.Effect<Option.Option<JobBatchRecord>, PersistenceError>
    /** The jobs an operator's retry re-created from this one, oldest first. */
    readonly findRetriesOf: (jobId: string) => Effect.Effect<ReadonlyArray<AiJob>, PersistenceError>
    readonly findByIdempotencyKey: (
      userId: string,
      jobType: string,
      idempotencyKey: string
    ) => Effect.Effect<Option.Option<AiJob>, PersistenceError>
    /**
     * `queued → running` as a compare-and-set, so of two workers given one job only one runs it;
     * the other gets `JobLockConflict`. `progress` rides along (raised, never lowered), as on
     * `takeOver` and `extendLocks`, so it costs no write of its own.
     */
    readonly lockJob: (
      jobId: string,
      workerId: string,
      lockTtl: Duration.Duration,
      progress?: number
    ) => Effect.Effect<AiJob, JobNotFound | IllegalTransition | JobLockConflict | PersistenceError>
    /**
     * PREPARE's common case: deliveries that arrived together are locked (`queued → running`, each
     * only if still of its `jobType`) and read back with their snapshots in one commit, not one per
     * job. None, in the order given, where nothing was written: the caller reads that row to learn why.
     */
    readonly lockQueued: (
      requests: ReadonlyArray<QueuedLockRequest>,
      workerId: string,
      lockTtl: Duration.Duration,
      progress?: number
    ) => Effect.Effect<ReadonlyArray<Option.Option<LockedWithSnapshot>>, PersistenceError>
    /**
     * Take a `running` job whose lock has expired (a crashed worker's:
     * a new attempt, refused with `AttemptsExhausted` when none is left) or was released (a
     * hand-off: the same attempt). The status stays `running`; the owner and lease number change,
     * fencing out the old worker.
     */
    readonly takeOver: (
      jobId: string,
      workerId: string,
      lockTtl: Duration.Duration,
      progress?: number
    ) => Effect.Effect<AiJob, JobNotFound | IllegalTransition | JobLockConflict | AttemptsExhausted | PersistenceError>
    /**
     * The lease keeper's beat (docs/architecture.md §4.3): every held lease's lock now ends
     * `lockTtl` from now and its progress is raised, in one fenced write for all of them.
     * Answers, in the order given, what became of each lease.
     */
    readonly extendLocks: (
      held: ReadonlyArray<HeldLease>,
      lockTtl: Duration.Duration
    ) => Effect.Effect<ReadonlyArray<LeaseBeat>, PersistenceError>
    /**
     * A hand-off (graceful shutdown): nobody holds the job any more, so another worker may take
     * it over at once, in the same attempt; this lease can no longer write.
     */
    readonly releaseLock: (lease: JobLease) => Effect.Effect<void, LockLost | PersistenceError>
    /**
     * Fenced on the lease. With `honourCancel` (a cancellable job type) it also requires that no
     * cancel was requested, refusing with `CancelRequestedBeforeSuccess`. The answer is `locked` (the
     * job as this lease locked it) with this write's columns, and `artifacts` (what the projection in
     * the same transaction recorded, in ordinal order) feed the terminal event: the store reads nothing back.
     */
    readonly markSucceeded: (
      lease: JobLease,
      outputHash: string,
      options: MarkSucceededOptions
    ) => Effect.Effect<AiJob, TerminalWriteError | CancelRequestedBeforeSuccess>
    readonly markFailed: (fence: JobFence, failure: JobFailure) => Effect.Effect<AiJob, TerminalWriteError>
    /** `running → cancelled`, once a cancel was requested (or by the reaper for a lost worker). */
    readonly markCancelled: (fence: JobFence) => Effect.Effect<AiJob, TerminalWriteError>
    /**
     * `queued → cancelled` at once; `running` only records the request (the worker or the reaper
     * ends it). A terminal job answers `JobNotCancellable` / `JobAlreadyCancelled`.
     */
    readonly requestCancel: (
      jobId: string
    ) => Effect.Effect<AiJob, JobNotFound | JobNotCancellable | JobAlreadyCancelled | PersistenceError>
    readonly findByLifecycleStatus: (
      statuses: ReadonlyArray<LifecycleStatus>,
      options?: { readonly queueName?: QueueName; readonly limit?: number }
    ) => Effect.Effect<ReadonlyArray<AiJob>, PersistenceError>
    /**
     * Queued jobs untouched for more than `olderThan`: their delivery may have been lost (a
     * queue that dropped it, a delivery acknowledged without work). Oldest first.
     */
    readonly findStaleQueued: (
      olderThan: Duration.Duration,
      limit: number
    ) => Effect.Effect<ReadonlyArray<AiJob>, PersistenceError>
    /**
     * Marks a queued job as looked after now (its `updated_at`) if it is still queued and unchanged
     * since `job` was read, so it is not found stale again at once and a second reaper's touch
     * fails; false when anything changed it meanwhile. Call inside the requeue's transaction.
     */
    readonly touchQueued: (job: AiJob) => Effect.Effect<boolean, PersistenceError>
    /** Running jobs whose lock ended more than `grace` ago (docs/architecture.md §12.1), oldest first. */
    readonly findExpiredLocks: (
      grace: Duration.Duration,
      limit: number
    ) => Effect.Effect<ReadonlyArray<AiJob>, PersistenceError>
    /** Newest first, keyset-paginated. */
    readonly list: (
      filter: JobListFilter,
      page: { readonly after?: JobListCursor | undefined; readonly limit: number }
    ) => Effect.Effect<ReadonlyArray<AiJob>, PersistenceError>
    /** Queued and running jobs of one user (the active-job limit). */
    readonly countActive: (userId: string) => Effect.Effect<number, PersistenceError>
    /** Jobs a user created at or after `since` (the daily quota). */
    readonly countCreatedSince: (userId: string, since: Date) => Effect.Effect<number, PersistenceError>
  }
>() {}
