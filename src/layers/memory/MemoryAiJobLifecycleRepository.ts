import { Duration, Effect, Either, HashMap, Layer, Option } from "effect"
import {
  AiJob,
  fencedJobId,
  isHandedOff,
  type JobFailure,
  type JobFence,
  type JobLease,
  type JobListCursor,
  type NewAiJob
} from "../../domain/AiJob.js"
import type { JobBatchRecord } from "../../domain/JobBatch.js"
import { DuplicateIdempotencyKey } from "../../domain/JobCreationErrors.js"
import { type FinishedArtifact, finishedEventFor } from "../../domain/JobFinishedEvent.js"
import { JobNotFound, LockLost } from "../../domain/LifecycleErrors.js"
import {
  cancelGuard,
  cancelledFailure,
  fenceGuard,
  leaseGuard,
  lockGuard,
  noCancelRequested,
  requestCancelGuard,
  takeOverGuard
} from "../../domain/LifecycleGuards.js"
import { legacyStatusOf, type LifecycleStatus } from "../../domain/LifecycleStatus.js"
import {
  AiJobLifecycleRepository,
  clampProgress,
  type HeldLease,
  type LeaseBeat,
  type LockedWithSnapshot,
  type MarkSucceededOptions,
  queuedJobFields
} from "../../services/AiJobLifecycleRepository.js"
import { MemoryDatabase, type MemoryTables } from "./MemoryDatabase.js"
import { insertOutboxEvent } from "./MemoryOutboxRepository.js"

const idempotencyIndexKey = (userId: string, jobType: string, key: string) => `${userId}\u0000${jobType}\u0000${key}`

const plus = (now: Date, span: Duration.Duration) => new Date(now.getTime() + Duration.toMillis(span))

/** A copy of `job` with `changes`, stamped `updatedAt = now`, its legacy status kept in step. */
const changed = (job: AiJob, now: Date, changes: Partial<AiJob>): AiJob => {
  const lifecycleStatus = changes.lifecycleStatus ?? job.lifecycleStatus
  return new AiJob(
    { ...job, ...changes, lifecycleStatus, status: legacyStatusOf[lifecycleStatus], updatedAt: now },
    { disableValidation: true }
  )
}

const withJob = (tables: MemoryTables, job: AiJob): MemoryTables => ({
  ...tables,
  aiJob: HashMap.set(tables.aiJob, job.id, job)
})

/** Constructor options of the memory repository; the defaults are the real behaviour. */
export interface MemoryAiJobLifecycleRepositoryOptions {
  /**
   * TEST-ONLY, A DELIBERATE BUG: skip the lease guard (status, owner and attempt) on every
   * worker write (heartbeat, progress, release, markSucceeded (its cancel condition too), and
   * markFailed / markCancelled by lease), as if the fencing `WHERE` clause had been dropped. The simulation switches it
   * on to prove that its invariants catch a broken engine. Never set it anywhere else.
   */
  readonly unsafeDisableFencingForSimulation?: boolean
}

/**
 * `ai_job` in memory: the same guards as MySQL's `WHERE` clauses, checked and applied in one
 * serialized write, with Effect's Clock as the store's clock.
 */
export const makeMemoryAiJobLifecycleRepositoryWith = (options: MemoryAiJobLifecycleRepositoryOptions) =>
  Effect.gen(function*() {
    const db = yield* MemoryDatabase
    const unfenced = options.unsafeDisableFencingForSimulation === true

    /** The lease guard, or (deliberate bug) only "the row exists". */
    const leaseCheck = (lease: JobLease, current: Option.Option<AiJob>, to: LifecycleStatus) =>
      unfenced
        ? Either.fromOption(current, () => new JobNotFound({ jobId: lease.jobId }))
        : leaseGuard(lease, current, to)
    const fenceCheck = (fence: JobFence, current: Option.Option<AiJob>, now: Date, to: LifecycleStatus) =>
      fence._tag === "Lease" ? leaseCheck(fence.lease, current, to) : fenceGuard(fence, current, now, to)
    const cancelCheck = (fence: JobFence, current: Option.Option<AiJob>, now: Date) =>
      fence._tag === "Lease" && unfenced
        ? leaseCheck(fence.lease, current, "cancelled")
        : cancelGuard(fence, current, now)

    const findById = (jobId: string) => db.read((tables) => HashMap.get(tables.aiJob, jobId))

    /** Checks `guard` against the row and, if it passes, stores `next(row, now)`. */
    const guarded = <E>(
      operation: string,
      jobId: string,
      guard: (current: Option.Option<AiJob>, now: Date) => Either.Either<AiJob, E>,
      next: (job: AiJob, now: Date) => AiJob
    ) =>
      db.write(operation, (tables, now) =>
        Either.map(guard(HashMap.get(tables.aiJob, jobId), now), (job) => {
          const updated = next(job, now)
          return [updated, withJob(tables, updated)] as const
        }))

    /** A job's artifacts in ordinal order, as its terminal event lists them. */
    const artifactsOf = (tables: MemoryTables, jobId: string): ReadonlyArray<FinishedArtifact> =>
      Array.from(HashMap.values(tables.aiJobArtifact))
        .filter((row) => row.jobId === jobId)
        .sort((a, b) => a.ordinal - b.ordinal)

    /**
     * `guarded`, and when the write ended the job, its terminal event inserted in the same
     * serialized write: both commit or neither (inside a transaction, both roll back with it).
     */
    const guardedWithEvent = <E>(
      operation: string,
      jobId: string,
      guard: (current: Option.Option<AiJob>, now: Date) => Either.Either<AiJob, E>,
      next: (job: AiJob, now: Date) => AiJob,
      artifacts?: ReadonlyArray<FinishedArtifact>
    ) =>
      db.write(operation, (tables, now) =>
        Either.map(guard(HashMap.get(tables.aiJob, jobId), now), (job) => {
          const updated = next(job, now)
          const written = withJob(tables, updated)
          const event = finishedEventFor(updated, artifacts ?? artifactsOf(written, jobId))
          return [updated, event === undefined ? written : insertOutboxEvent(written, event, now)[1]] as const
        }))

    const createJob = (job: NewAiJob) =>
      db.write("ai_job.create", (tables, now) => {
        const indexKey = job.idempotencyKey === null
          ? undefined
          : idempotencyIndexKey(job.userId, job.jobType, job.idempotencyKey)
        if (indexKey !== undefined && HashMap.has(tables.aiJobByIdempotencyKey, indexKey)) {
          return Either.left(
            new DuplicateIdempotencyKey({
              userId: job.userId,
              jobType: job.jobType,
              idempotencyKey: job.idempotencyKey ?? ""
            })
          )
        }
        const row = new AiJob({ ...queuedJobFields(job), createdAt: now, updatedAt: now }, { disableValidation: true })
        const next = withJob(tables, row)
        return Either.right(
          [
            row,
            indexKey === undefined
              ? next
              : { ...next, aiJobByIdempotencyKey: HashMap.set(next.aiJobByIdempotencyKey, indexKey, row.id) }
          ] as const
        )
      })

    // Atomic inside the caller's transaction, as the one multi-row INSERT is on MySQL.
    const createJobs = (newJobs: ReadonlyArray<NewAiJob>) => Effect.forEach(newJobs, createJob)

    const findByIds = (jobIds: ReadonlyArray<string>) =>
      db.read((tables) => jobIds.flatMap((id) => Option.toArray(HashMap.get(tables.aiJob, id))))

    const recordBatch = (batch: JobBatchRecord) =>
      db.write("ai_job_batch.create", (tables) => {
        const indexKey = idempotencyIndexKey(batch.userId, batch.jobType, batch.idempotencyKey)
        if (HashMap.has(tables.aiJobBatchByIdempotencyKey, indexKey)) {
          return Either.left(
            new DuplicateIdempotencyKey({
              userId: batch.userId,
              jobType: batch.jobType,
              idempotencyKey: batch.idempotencyKey
            })
          )
        }
        return Either.right(
          [
            undefined,
            { ...tables, aiJobBatchByIdempotencyKey: HashMap.set(tables.aiJobBatchByIdempotencyKey, indexKey, batch) }
          ] as const
        )
      })

    const findBatchByIdempotencyKey = (userId: string, jobType: string, idempotencyKey: string) =>
      db.read((tables) =>
        HashMap.get(tables.aiJobBatchByIdempotencyKey, idempotencyIndexKey(userId, jobType, idempotencyKey))
      )

    const findByIdempotencyKey = (userId: string, jobType: string, idempotencyKey: string) =>
      db.read((tables) =>
        HashMap.get(tables.aiJobByIdempotencyKey, idempotencyIndexKey(userId, jobType, idempotencyKey)).pipe(
          Option.flatMap((jobId) => HashMap.get(tables.aiJob, jobId))
        )
      )

    const raised = (job: AiJob, progress: number | undefined) =>
      progress === undefined ? job.progress : Math.max(job.progress, clampProgress(progress))

    /** A queued job as its first lock leaves it. */
    const lockedRow = (
      job: AiJob,
      now: Date,
      workerId: string,
      lockTtl: Duration.Duration,
      progress: number | undefined
    ) =>
      changed(job, now, {
        lifecycleStatus: "running",
        progress: raised(job, progress),
        lockedBy: workerId,
        lockedAt: now,
        lockUntil: plus(now, lockTtl),
        startedAt: job.startedAt ?? now,
        attemptCount: job.attemptCount + 1,
        leaseNo: job.leaseNo + 1
      })

    const lockJob = (jobId: string, workerId: string, lockTtl: Duration.Duration, progress?: number) =>
      guarded(
        "ai_job.lock",
        jobId,
        (current) => lockGuard(jobId, current),
        (job, now) => lockedRow(job, now, workerId, lockTtl, progress)
      )

    /** Every request judged and locked in one serialized write, as MySQL's one locking transaction. */
    const lockQueued: AiJobLifecycleRepository["Type"]["lockQueued"] = (requests, workerId, lockTtl, progress) =>
      requests.length === 0
        ? Effect.succeed([])
        : db.write("ai_job.lock", (tables, now) => {
          let next = tables
          const answers = requests.map(({ jobId, jobType }) => {
            // Judged on the rows as this write leaves them: a second request for a job finds it running.
            const current = HashMap.get(next.aiJob, jobId)
            if (
              Option.isNone(current) || current.value.lifecycleStatus !== "queued" || current.value.jobType !== jobType
            ) {
              return Option.none<LockedWithSnapshot>()
            }
            const job = lockedRow(current.value, now, workerId, lockTtl, progress)
            const snapshot = Option.fromNullable(
              Array.from(HashMap.values(tables.aiJobSnapshot)).find((row) => row.jobId === jobId)
            )
            next = withJob(next, job)
            return Option.some<LockedWithSnapshot>({ job, snapshot })
          })
          return Either.right([answers, next] as const)
        })

    const takeOver = (jobId: string, workerId: string, lockTtl: Duration.Duration, progress?: number) =>
      guarded(
        "ai_job.takeOver",
        jobId,
        (current, now) => takeOverGuard(jobId, current, now),
        (job, now) =>
          changed(job, now, {
            progress: raised(job, progress),
            lockedBy: workerId,
            lockedAt: now,
            lockUntil: plus(now, lockTtl),
            // A crashed holder's lock costs an attempt; a released one (a hand-off) does not.
            attemptCount: isHandedOff(job) ? job.attemptCount : job.attemptCount + 1,
            leaseNo: job.leaseNo + 1
          })
      )

    /** A write that keeps the job running: a job that left `running` or vanished is a lost lock. */
    const whileLeased = (operation: string, lease: JobLease, next: (job: AiJob, now: Date) => AiJob) =>
      guarded(
        operation,
        lease.jobId,
        (current) => Either.mapLeft(leaseCheck(lease, current, "running"), () => new LockLost({ ...lease })),
        next
      )

    /** Every held lease checked and extended in one serialized write, as MySQL's one UPDATE. */
    const extendLocks = (held: ReadonlyArray<HeldLease>, lockTtl: Duration.Duration) =>
      held.length === 0
        ? Effect.succeed<ReadonlyArray<LeaseBeat>>([])
        : db.write("ai_job.extendLocks", (tables, now) => {
          let aiJob = tables.aiJob
          const beats = held.map(({ lease, progress, reportCancel }): LeaseBeat =>
            Either.match(leaseCheck(lease, HashMap.get(aiJob, lease.jobId), "running"), {
              onLeft: () => "Lost",
              onRight: (job) => {
                aiJob = HashMap.set(
                  aiJob,
                  job.id,
                  changed(job, now, {
                    lockUntil: plus(now, lockTtl),
                    progress: Math.max(job.progress, clampProgress(progress))
                  })
                )
                return reportCancel && job.cancelRequestedAt !== null ? "CancelRequested" : "Extended"
              }
            })
          )
          return Either.right([beats, { ...tables, aiJob }] as const)
        })

    const releaseLock = (lease: JobLease) =>
      whileLeased("ai_job.releaseLock", lease, (job, now) => changed(job, now, { lockedBy: null, lockUntil: null }))
        .pipe(
          Effect.asVoid
        )

    const markSucceeded = (lease: JobLease, outputHash: string, options: MarkSucceededOptions) =>
      guardedWithEvent(
        "ai_job.markSucceeded",
        lease.jobId,
        // Unfenced (the deliberate bug) drops the whole `WHERE`, the cancel condition with it.
        (current) =>
          Either.flatMap(
            leaseCheck(lease, current, "succeeded"),
            noCancelRequested(!unfenced && options.honourCancel === true)
          ),
        (job, now) =>
          changed(job, now, {
            lifecycleStatus: "succeeded",
            progress: 100,
            outputHash,
            finishedAt: now,
            lockUntil: null
          }),
        options.artifacts
      )

    const markFailed = (fence: JobFence, failure: JobFailure) =>
      guardedWithEvent(
        "ai_job.markFailed",
        fencedJobId(fence),
        (current, now) => fenceCheck(fence, current, now, "failed"),
        (job, now) =>
          changed(job, now, {
            lifecycleStatus: "failed",
            errorCode: failure.errorCode,
            publicErrorMessage: failure.publicErrorMessage,
            internalErrorMessage: failure.internalErrorMessage,
            finishedAt: now,
            lockUntil: null
          })
      )

    const markCancelled = (fence: JobFence) =>
      guardedWithEvent(
        "ai_job.markCancelled",
        fencedJobId(fence),
        (current, now) => cancelCheck(fence, current, now),
        (job, now) =>
          changed(job, now, {
            lifecycleStatus: "cancelled",
            errorCode: cancelledFailure.errorCode,
            publicErrorMessage: cancelledFailure.publicErrorMessage,
            finishedAt: now,
            lockUntil: null
          })
      )

    const requestCancel = (jobId: string) =>
      guardedWithEvent(
        "ai_job.requestCancel",
        jobId,
        (current) => requestCancelGuard(jobId, current),
        (job, now) =>
          job.lifecycleStatus === "queued"
            ? changed(job, now, {
              lifecycleStatus: "cancelled",
              cancelRequestedAt: now,
              finishedAt: now,
              errorCode: cancelledFailure.errorCode,
              publicErrorMessage: cancelledFailure.publicErrorMessage
            })
            : changed(job, now, { cancelRequestedAt: job.cancelRequestedAt ?? now })
      )

    const allJobs = (tables: MemoryTables) => Array.from(HashMap.values(tables.aiJob))

    const comparePosition = (a: JobListCursor, b: JobListCursor) =>
      a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
    const oldestFirst = (a: AiJob, b: AiJob) => comparePosition(a, b)

    const findByLifecycleStatus = (
      statuses: ReadonlyArray<LifecycleStatus>,
      options: { readonly queueName?: string; readonly limit?: number } = {}
    ) =>
      db.read((tables) =>
        allJobs(tables)
          .filter((job) => statuses.includes(job.lifecycleStatus))
          .filter((job) => options.queueName === undefined || job.queueName === options.queueName)
          .sort(oldestFirst)
          .slice(0, options.limit ?? 100)
      )

    const findExpiredLocks = (grace: Duration.Duration, limit: number) =>
      db.read((tables, now) =>
        allJobs(tables)
          .filter((job) =>
            job.lifecycleStatus === "running" &&
            (job.lockUntil === null || job.lockUntil.getTime() < now.getTime() - Duration.toMillis(grace))
          )
          .sort((a, b) => (a.lockUntil?.getTime() ?? 0) - (b.lockUntil?.getTime() ?? 0))
          .slice(0, limit)
      )

    const findStaleQueued = (olderThan: Duration.Duration, limit: number) =>
      db.read((tables, now) =>
        allJobs(tables)
          .filter((job) =>
            job.lifecycleStatus === "queued" && job.updatedAt.getTime() < now.getTime() - Duration.toMillis(olderThan)
          )
          .sort((a, b) => a.updatedAt.getTime() - b.updatedAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
          .slice(0, limit)
      )

    const touchQueued = (seen: AiJob) =>
      db.write("ai_job.touchQueued", (tables, now) => {
        const current = HashMap.get(tables.aiJob, seen.id)
        if (
          Option.isNone(current) || current.value.lifecycleStatus !== "queued" ||
          current.value.updatedAt.getTime() !== seen.updatedAt.getTime()
        ) {
          return Either.right([false, tables] as const)
        }
        return Either.right([true, withJob(tables, changed(current.value, now, {}))] as const)
      })

    const findRetriesOf = (jobId: string) =>
      db.read((tables) => allJobs(tables).filter((job) => job.retriedFromJobId === jobId).sort(oldestFirst))

    const list: AiJobLifecycleRepository["Type"]["list"] = (filter, page) =>
      db.read((tables) =>
        allJobs(tables)
          .filter((job) =>
            (filter.userId === undefined || job.userId === filter.userId) &&
            (filter.jobType === undefined || job.jobType === filter.jobType) &&
            (filter.statuses === undefined || filter.statuses.length === 0 ||
              filter.statuses.includes(job.lifecycleStatus)) &&
            (filter.queueName === undefined || job.queueName === filter.queueName) &&
            (filter.createdFrom === undefined || job.createdAt.getTime() >= filter.createdFrom.getTime()) &&
            (filter.createdTo === undefined || job.createdAt.getTime() < filter.createdTo.getTime()) &&
            (page.after === undefined || comparePosition(job, page.after) < 0)
          )
          .sort((a, b) => oldestFirst(b, a))
          .slice(0, page.limit)
      )

    return AiJobLifecycleRepository.of({
      createJob,
      createJobs,
      findById,
      findByIds,
      recordBatch,
      findBatchByIdempotencyKey,
      findRetriesOf,
      findByIdempotencyKey,
      lockJob,
      lockQueued,
      takeOver,
      extendLocks,
      releaseLock,
      markSucceeded,
      markFailed,
      markCancelled,
      requestCancel,
      findByLifecycleStatus,
      findExpiredLocks,
      findStaleQueued,
      touchQueued,
      list,
      countActive: (userId) =>
        db.read((tables) =>
          allJobs(tables).filter((job) =>
            job.userId === userId && (job.lifecycleStatus === "queued" || job.lifecycleStatus === "running")
          ).length
        ),
      countCreatedSince: (userId, since) =>
        db.read((tables) =>
          allJobs(tables).filter((job) => job.userId === userId && job.createdAt.getTime() >= since.getTime()).length
        )
    })
  })

export const makeMemoryAiJobLifecycleRepository = makeMemoryAiJobLifecycleRepositoryWith({})

export const MemoryAiJobLifecycleRepository = Layer.effect(AiJobLifecycleRepository, makeMemoryAiJobLifecycleRepository)

/** The memory repository with explicit options (simulations only; see the options). */
export const MemoryAiJobLifecycleRepositoryWith = (options: MemoryAiJobLifecycleRepositoryOptions) =>
  Layer.effect(AiJobLifecycleRepository, makeMemoryAiJobLifecycleRepositoryWith(options))
