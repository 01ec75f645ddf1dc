import { SqlClient, SqlSchema } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import type { Fragment } from "@effect/sql/Statement"
import { isFragment } from "@effect/sql/Statement"
import { Clock, Effect, Either, Layer, Option, Schema } from "effect"
import { AiJob } from "../../domain/AiJob.js"
import type { JobFailure, JobFence, JobLease, NewAiJob } from "../../domain/AiJob.js"
import { fencedJobId } from "../../domain/AiJob.js"
import type { JobBatchRecord } from "../../domain/JobBatch.js"
import { DuplicateIdempotencyKey } from "../../domain/JobCreationErrors.js"
import { FinishedArtifact, finishedEventFor } from "../../domain/JobFinishedEvent.js"
import { JobSnapshot } from "../../domain/JobSnapshot.js"
import { JobLockConflict, LockLost } from "../../domain/LifecycleErrors.js"
import {
  cancelGuard,
  cancelledFailure,
  fenceGuard,
  lockGuard,
  requestCancelGuard,
  succeedGuard,
  takeOverGuard
} from "../../domain/LifecycleGuards.js"
import { reaperWorkerId } from "../../domain/LifecycleGuards.js"
import { isTerminal, legacyStatusOf, type LifecycleStatus } from "../../domain/LifecycleStatus.js"
import { PersistenceError } from "../../domain/PersistenceError.js"
import {
  AiJobLifecycleRepository,
  clampProgress,
  type HeldLease,
  type LeaseBeat,
  type LockedWithSnapshot,
  queuedJobFields,
  type QueuedLockRequest
} from "../../services/AiJobLifecycleRepository.js"
import { UnitOfWork } from "../../services/UnitOfWork.js"
import { makeMysqlOutboxRepository } from "./MysqlOutboxRepository.js"
import { MysqlUnitOfWork } from "./MysqlUnitOfWork.js"
import { AiJobColumns, AiJobRow, changedRows, JobBatchRow, JsonColumn, NewAiJobRow, Total } from "./rows.js"
import { sqlClock } from "./sqlClock.js"
import { isDuplicateKey, persistence } from "./sqlErrors.js"
import { insertRows, paddedForIn } from "./statementShapes.js"

/** The rest of a `SELECT * FROM ai_job` (its WHERE, ORDER BY, LIMIT), for the lists whose clauses vary. */
const SqlTail = Schema.declare(isFragment)

/** A job row with its snapshot's columns (all NULL when it has none), PREPARE's one read after the lock. */
const JobWithSnapshotRow = Schema.Struct({
  ...AiJobColumns.fields,
  snapshotRowId: Schema.NullOr(Schema.String),
  snapshotContent: JsonColumn,
  snapshotRedactionVersion: Schema.NullOr(Schema.String),
  snapshotExpiresAt: Schema.NullOr(Schema.DateFromSelf),
  snapshotCreatedAt: Schema.NullOr(Schema.DateFromSelf)
})

/** A queued row read to be locked in a group, with the database's time to lock it at. */
const QueuedForLockRow = Schema.Struct({ ...JobWithSnapshotRow.fields, lockTime: Schema.DateFromSelf })

/** Who holds a row now, read by a beat whose extension matched fewer rows than it held. */
const LeaseState = Schema.Struct({
  id: Schema.String,
  lifecycleStatus: Schema.String,
  lockedBy: Schema.NullOr(Schema.String),
  leaseNo: Schema.Number,
  cancelRequestedAt: Schema.NullOr(Schema.DateFromSelf)
})

/**
 * `ai_job` on MySQL. Every state change is one compare-and-set `UPDATE ... WHERE` on the
 * expected state, read back through `affectedRows` (MySQL has no `RETURNING`); when nothing
 * matched, the row is read and `LifecycleGuards` names the refusal. Lease times are the
 * server's `UTC_TIMESTAMP(3)`.
 */
export const makeMysqlAiJobLifecycleRepository = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const unitOfWork = yield* UnitOfWork
  const outbox = yield* makeMysqlOutboxRepository

  const { minusMillis, now, plusMillis } = sqlClock(sql)
  /**
   * When a compare-and-set matched nothing, the guards are asked why with a clock at the end of
   * time: the database's own clock already judged expiry, so only the other reasons (missing,
   * wrong state, another owner or attempt, attempts used up) are named; a refusal for time
   * alone falls through to the race error.
   */
  const endOfTime = new Date(8.64e15)
  const status = (to: LifecycleStatus) => sql`lifecycle_status = ${to}, status = ${legacyStatusOf[to]}`

  const byId = {
    Request: Schema.String,
    Result: AiJobRow,
    execute: (jobId: string) => sql`SELECT * FROM ai_job WHERE id = ${jobId}`
  }
  const findJob = SqlSchema.findOne(byId)
  const singleJob = SqlSchema.single(byId)
  const findJobByIdempotencyKey = SqlSchema.findOne({
    Request: Schema.Struct({ userId: Schema.String, jobType: Schema.String, idempotencyKey: Schema.String }),
    Result: AiJobRow,
    execute: (key) =>
      sql`SELECT * FROM ai_job WHERE user_id = ${key.userId} AND job_type = ${key.jobType} AND idempotency_key = ${key.idempotencyKey}`
  })
  const selectJobs = SqlSchema.findAll({
    Request: SqlTail,
    Result: AiJobRow,
    execute: (tail) => sql`SELECT * FROM ai_job ${tail}`
  })
  const insertJob = SqlSchema.void({
    Request: Schema.Struct({ row: NewAiJobRow, at: Schema.DateFromSelf }),
    // The creation time is bound (not the server's clock) so the new row needs no read-back; it
    // is no lease time. MySQL's `INSERT ... SET`, column names from the row's keys.
    execute: ({ at, row }) => sql`INSERT INTO ai_job SET ${sql.update(row)}, created_at = ${at}, updated_at = ${at}`
  })
  const insertJobs = SqlSchema.void({
    Request: Schema.Struct({ rows: Schema.Array(NewAiJobRow), at: Schema.DateFromSelf }),
    execute: ({ at, rows }) => insertRows(sql, "ai_job", rows, [["created_at", sql`${at}`], ["updated_at", sql`${at}`]])
  })
  const selectJobsByIds = SqlSchema.findAll({
    Request: Schema.Array(Schema.String),
    Result: AiJobRow,
    execute: (ids) => sql`SELECT * FROM ai_job WHERE id IN ${sql.in(paddedForIn(ids))}`
  })
  const insertBatch = SqlSchema.void({
    Request: JobBatchRow,
    execute: (row) => sql`INSERT INTO ai_job_batch SET ${sql.update(row)}, created_at = ${now}`
  })
  const findBatchByKey = SqlSchema.findOne({
    Request: Schema.Struct({ userId: Schema.String, jobType: Schema.String, idempotencyKey: Schema.String }),
    Result: JobBatchRow,
    execute: (key) =>
      sql`SELECT id, user_id, job_type, idempotency_key, request_hash, job_ids FROM ai_job_batch
          WHERE user_id = ${key.userId} AND job_type = ${key.jobType} AND idempotency_key = ${key.idempotencyKey}`
  })
  const selectWithSnapshot = SqlSchema.findOne({
    Request: Schema.String,
    Result: JobWithSnapshotRow,
    execute: (jobId) =>
      sql`SELECT j.*, s.id AS snapshot_row_id, s.content AS snapshot_content, s.redaction_version AS snapshot_redaction_version,
            s.expires_at AS snapshot_expires_at, s.created_at AS snapshot_created_at
          FROM ai_job j LEFT JOIN ai_job_snapshot s ON s.job_id = j.id
          WHERE j.id = ${jobId}`
  })
  /** The job and its snapshot, as two domain values; the columns were decoded once, by the row schema. */
  const lockedWithSnapshotOf = (row: typeof JobWithSnapshotRow.Type): LockedWithSnapshot => {
    const {
      snapshotContent,
      snapshotCreatedAt,
      snapshotExpiresAt,
      snapshotRedactionVersion,
      snapshotRowId,
      ...columns
    } = row
    return {
      job: new AiJob(columns, { disableValidation: true }),
      snapshot: snapshotRowId === null || snapshotRedactionVersion === null || snapshotExpiresAt === null ||
          snapshotCreatedAt === null
        ? Option.none()
        : Option.some(
          new JobSnapshot({
            id: snapshotRowId,
            jobId: columns.id,
            content: snapshotContent,
            redactionVersion: snapshotRedactionVersion,
            expiresAt: snapshotExpiresAt,
            createdAt: snapshotCreatedAt
          }, { disableValidation: true })
        )
    }
  }
  const findLockedWithSnapshot = (jobId: string) =>
    Effect.map(selectWithSnapshot(jobId), Option.map(lockedWithSnapshotOf))
  const selectQueuedForLockRows = SqlSchema.findAll({
    Request: Schema.Array(Schema.String),
    Result: QueuedForLockRow,
    execute: (ids) =>
      sql`SELECT j.*, s.id AS snapshot_row_id, s.content AS snapshot_content, s.redaction_version AS snapshot_redaction_version,
            s.expires_at AS snapshot_expires_at, s.created_at AS snapshot_created_at, ${now} AS lock_time
          FROM ai_job j LEFT JOIN ai_job_snapshot s ON s.job_id = j.id
          WHERE j.id IN ${sql.in(paddedForIn(ids))} AND j.lifecycle_status = 'queued'
          ORDER BY j.id FOR UPDATE SKIP LOCKED`
  })
  const selectQueuedForLock = (ids: ReadonlyArray<string>) =>
    Effect.map(
      selectQueuedForLockRows(ids),
      (rows) => rows.map(({ lockTime, ...row }) => ({ locked: lockedWithSnapshotOf(row), lockedAt: lockTime }))
    )
  const readLeaseStates = SqlSchema.findAll({
    Request: Schema.Array(Schema.String),
    Result: LeaseState,
    execute: (ids) =>
      sql`SELECT id, lifecycle_status, locked_by, lease_no, cancel_requested_at FROM ai_job WHERE id IN ${
        sql.in(paddedForIn(ids))
      }`
  })
  const readArtifacts = SqlSchema.findAll({
    Request: Schema.String,
    Result: FinishedArtifact,
    execute: (jobId) =>
      sql`SELECT artifact_type, artifact_id FROM ai_job_artifact WHERE job_id = ${jobId} ORDER BY ordinal`
  })
  const countWhere = SqlSchema.findOne({
    Request: SqlTail,
    Result: Total,
    execute: (where) => sql`SELECT COUNT(*) AS total FROM ai_job WHERE ${where}`
  })

  const findById = (jobId: string) => findJob(jobId).pipe(persistence("ai_job.findById"))

  const mustFind = (operation: string, jobId: string) =>
    singleJob(jobId).pipe(
      Effect.catchTag("NoSuchElementException", () =>
        Effect.fail(new PersistenceError({ operation, message: `job ${jobId} vanished after its update` }))),
      persistence(operation)
    )

  /** Runs a compare-and-set; on no match, reads the row and fails with the guard's reason. */
  const compareAndSet = <E>(
    operation: string,
    jobId: string,
    update: Effect.Effect<unknown, SqlError>,
    whyRefused: (current: Option.Option<AiJob>) => Either.Either<AiJob, E>,
    raced: () => E
  ): Effect.Effect<AiJob, E | PersistenceError> =>
    Effect.gen(function*() {
      const changed = yield* changedRows(update).pipe(persistence(operation))
      if (changed > 0) return yield* mustFind(operation, jobId)
      const current = yield* findById(jobId)
      return yield* Either.match(whyRefused(current), {
        onLeft: (error) => Effect.fail(error),
        // The row now satisfies the condition although our update matched nothing: another
        // writer moved it in between. Report it as the race it was.
        onRight: () => Effect.fail(raced())
      })
    })

  const leaseWhere = (lease: JobLease) =>
    sql`id = ${lease.jobId} AND lifecycle_status = 'running' AND locked_by = ${lease.workerId} AND lease_no = ${lease.leaseNo}`

  const fenceWhere = (fence: JobFence) =>
    fence._tag === "Lease"
      ? leaseWhere(fence.lease)
      : sql`id = ${fence.jobId} AND lifecycle_status = 'running' AND lease_no = ${fence.leaseNo} AND locked_by <=> ${fence.lockedBy}
          AND (lock_until IS NULL OR lock_until < ${minusMillis(fence.graceMs)})`

  /**
   * Runs a write that may end a job in one transaction with its terminal event (§6.8): the
   * caller's when one is open (PROJECT's), else one of its own, so the two commit together.
   */
  const atomically = <A, E, R>(write: Effect.Effect<A, E, R>) =>
    Effect.flatMap(
      Effect.serviceOption(SqlClient.TransactionConnection),
      (open) => Option.isSome(open) ? write : unitOfWork.transaction(write)
    )

  /** The terminal event of `job` when the write ended it (none for a job still running). */
  const withFinishedEvent = (job: AiJob, artifacts?: ReadonlyArray<FinishedArtifact>) =>
    Effect.gen(function*() {
      if (!isTerminal(job.lifecycleStatus)) return job
      const listed = artifacts ?? (job.lifecycleStatus === "succeeded"
        ? yield* readArtifacts(job.id).pipe(persistence("ai_job_artifact.listForEvent"))
        : [])
      const event = finishedEventFor(job, listed)
      if (event !== undefined) yield* outbox.createInTransaction(event)
      return job
    })

  /** Effect's Clock at DATETIME(3) precision: what the column stores is what the caller gets. */
  const clockDate = Effect.map(Clock.currentTimeMillis, (millis) => new Date(Math.floor(millis)))

  const createJob = (job: NewAiJob) =>
    Effect.flatMap(clockDate, (at) => {
      const row = queuedJobFields(job)
      return insertJob({ row, at }).pipe(
        Effect.as(new AiJob({ ...row, createdAt: at, updatedAt: at }, { disableValidation: true }))
      )
    }).pipe(
      Effect.catchIf(isDuplicateKey, () =>
        Effect.fail(
          new DuplicateIdempotencyKey({
            userId: job.userId,
            jobType: job.jobType,
            idempotencyKey: job.idempotencyKey ?? ""
          })
        )),
      persistence("ai_job.create")
    )

  /** A unique key refused the row: `DuplicateIdempotencyKey`, naming the key the row carried. */
  const duplicateKeyOf =
    (job: { readonly userId: string; readonly jobType: string; readonly idempotencyKey: string | null }) =>
    <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | DuplicateIdempotencyKey, R> =>
      Effect.catchIf(self, (error: E) => isDuplicateKey(error), () =>
        Effect.fail(
          new DuplicateIdempotencyKey({
            userId: job.userId,
            jobType: job.jobType,
            idempotencyKey: job.idempotencyKey ?? ""
          })
        ))

  const createJobs = (jobs: ReadonlyArray<NewAiJob>) =>
    Effect.flatMap(clockDate, (at) => {
      const rows = jobs.map(queuedJobFields)
      return insertJobs({ rows, at }).pipe(
        Effect.as(rows.map((row) => new AiJob({ ...row, createdAt: at, updatedAt: at }, { disableValidation: true })))
      )
    }).pipe(
      // Only a job with a key can collide; name the first such job.
      duplicateKeyOf(
        jobs.find((job) => job.idempotencyKey !== null) ?? { userId: "", jobType: "", idempotencyKey: null }
      ),
      persistence("ai_job.createMany")
    )

  const findByIds = (jobIds: ReadonlyArray<string>) =>
    jobIds.length === 0
      ? Effect.succeed([])
      : selectJobsByIds(jobIds).pipe(
        Effect.map((found) => {
          const byId = new Map(found.map((job) => [job.id, job]))
          return jobIds.flatMap((id) => byId.get(id) ?? [])
        }),
        persistence("ai_job.findByIds")
      )

  const recordBatch = (batch: JobBatchRecord) =>
    insertBatch(batch).pipe(duplicateKeyOf(batch), persistence("ai_job_batch.create"))

  const findBatchByIdempotencyKey = (userId: string, jobType: string, idempotencyKey: string) =>
    findBatchByKey({ userId, jobType, idempotencyKey }).pipe(persistence("ai_job_batch.findByIdempotencyKey"))

  const findByIdempotencyKey = (userId: string, jobType: string, idempotencyKey: string) =>
    findJobByIdempotencyKey({ userId, jobType, idempotencyKey }).pipe(persistence("ai_job.findByIdempotencyKey"))

  /** Progress raised to `progress` when given (never lowered); otherwise left as it is. */
  const raisedProgress = (progress: number | undefined) =>
    progress === undefined ? sql`progress = progress` : sql`progress = GREATEST(progress, ${clampProgress(progress)})`

  /** What a first lock sets: `queued → running`, a new lease and attempt, the lock's times. */
  const firstLockSet = (workerId: string, lockTtlMs: number, progress: number | undefined) =>
    sql`${status("running")}, ${raisedProgress(progress)}, locked_by = ${workerId}, locked_at = ${now},
        lock_until = ${plusMillis(lockTtlMs)}, started_at = COALESCE(started_at, ${now}),
        attempt_count = attempt_count + 1, lease_no = lease_no + 1, updated_at = ${now}`

  const lockJob = (jobId: string, workerId: string, lockTtlMs: number, progress?: number) =>
    compareAndSet(
      "ai_job.lock",
      jobId,
      sql`UPDATE ai_job SET ${
        firstLockSet(workerId, lockTtlMs, progress)
      } WHERE id = ${jobId} AND lifecycle_status = 'queued'`.raw,
      (current) => lockGuard(jobId, current),
      () => new JobLockConflict({ jobId })
    )

  const lockOneQueued = (
    request: QueuedLockRequest,
    workerId: string,
    lockTtlMs: number,
    progress: number | undefined
  ) =>
    changedRows(
      sql`UPDATE ai_job SET ${firstLockSet(workerId, lockTtlMs, progress)}
          WHERE id = ${request.jobId} AND job_type = ${request.jobType} AND lifecycle_status = 'queued'`.raw
    ).pipe(
      Effect.flatMap((changed) =>
        changed === 0
          ? Effect.succeed(Option.none<LockedWithSnapshot>())
          : Effect.flatMap(findLockedWithSnapshot(request.jobId), (found) =>
            Option.isSome(found)
              ? Effect.succeed(found)
              : Effect.fail(
                new PersistenceError({
                  operation: "ai_job.lock",
                  message: `job ${request.jobId} vanished after its update`
                })
              ))
      ),
      persistence("ai_job.lock")
    )

  /**
   * Several deliveries at once: the queued rows (with their snapshots and the database's time)
   * read under `FOR UPDATE SKIP LOCKED`, then one UPDATE locks them all with that time, and one
   * COMMIT. A row another transaction holds is skipped, not waited for: its delivery reads the
   * row and judges it as a lone one does. The answers are built from the rows read, as `lockedRow`
   * would leave them, so nothing is read back.
   */
  const lockGroupQueued = (
    requests: ReadonlyArray<QueuedLockRequest>,
    workerId: string,
    lockTtlMs: number,
    progress: number | undefined
  ) =>
    unitOfWork.transaction(Effect.gen(function*() {
      const rows = yield* selectQueuedForLock(requests.map((request) => request.jobId)).pipe(persistence("ai_job.lock"))
      const wanted = new Map<string, string>()
      for (const request of requests) if (!wanted.has(request.jobId)) wanted.set(request.jobId, request.jobType)
      const ours = rows.filter((row) => wanted.get(row.locked.job.id) === row.locked.job.jobType)
      const at = ours[0]?.lockedAt
      if (at === undefined) return requests.map(() => Option.none<LockedWithSnapshot>())
      const lockUntil = new Date(at.getTime() + Math.round(lockTtlMs))
      const ids = ours.map((row) => row.locked.job.id)
      const changed = yield* changedRows(
        sql`UPDATE ai_job SET ${status("running")}, ${
          raisedProgress(progress)
        }, locked_by = ${workerId}, locked_at = ${at},
              lock_until = ${lockUntil}, started_at = COALESCE(started_at, ${at}),
              attempt_count = attempt_count + 1, lease_no = lease_no + 1, updated_at = ${at}
            WHERE id IN ${sql.in(paddedForIn(ids))} AND lifecycle_status = 'queued'`.raw
      ).pipe(persistence("ai_job.lock"))
      if (changed !== ids.length) {
        return yield* Effect.fail(
          new PersistenceError({
            operation: "ai_job.lock",
            message: `locked ${changed} of ${ids.length} rows held for the lock`
          })
        )
      }
      const locked = new Map(ours.map(({ locked: { job, snapshot } }): [string, LockedWithSnapshot] => [job.id, {
        job: new AiJob({
          ...job,
          lifecycleStatus: "running",
          status: legacyStatusOf.running,
          progress: progress === undefined ? job.progress : Math.max(job.progress, clampProgress(progress)),
          lockedBy: workerId,
          lockedAt: at,
          lockUntil,
          startedAt: job.startedAt ?? at,
          attemptCount: job.attemptCount + 1,
          leaseNo: job.leaseNo + 1,
          updatedAt: at
        }, { disableValidation: true }),
        snapshot
      }]))
      return requests.map((request) => {
        const found = locked.get(request.jobId)
        // Each job is answered once: a second request for it in the group finds it taken.
        if (found === undefined) return Option.none<LockedWithSnapshot>()
        locked.delete(request.jobId)
        return Option.some(found)
      })
    }))

  const lockQueued = (
    requests: ReadonlyArray<QueuedLockRequest>,
    workerId: string,
    lockTtlMs: number,
    progress?: number
  ) =>
    requests.length === 0
      ? Effect.succeed([])
      : requests.length === 1
      ? Effect.map(lockOneQueued(requests[0]!, workerId, lockTtlMs, progress), (locked) => [locked])
      : lockGroupQueued(requests, workerId, lockTtlMs, progress)

  const takeOver = (jobId: string, workerId: string, lockTtlMs: number, progress?: number) =>
    compareAndSet(
      "ai_job.takeOver",
      jobId,
      // A crashed holder's expired lock costs an attempt; a released one (locked_by NULL, a
      // hand-off) does not. SET runs left to right, so the attempt is judged before locked_by changes.
      sql`UPDATE ai_job SET attempt_count = attempt_count + IF(locked_by IS NULL, 0, 1), lease_no = lease_no + 1, ${
        raisedProgress(progress)
      },
            locked_by = ${workerId}, locked_at = ${now}, lock_until = ${plusMillis(lockTtlMs)}, updated_at = ${now}
          WHERE id = ${jobId} AND lifecycle_status = 'running'
            AND (locked_by IS NULL OR ((lock_until IS NULL OR lock_until < ${now}) AND attempt_count < max_attempts))`
        .raw,
      (current) => takeOverGuard(jobId, current, endOfTime),
      () => new JobLockConflict({ jobId })
    )

  /**
   * A lease write that needs no row back (the release): when it matched nothing, the lease is
   * gone whatever the reason (another owner, the job left `running`, or vanished).
   */
  const leaseWrite = (operation: string, lease: JobLease, set: Fragment) =>
    changedRows(sql`UPDATE ai_job SET ${set}, updated_at = ${now} WHERE ${leaseWhere(lease)}`.raw).pipe(
      persistence(operation),
      Effect.flatMap((changed) => (changed > 0 ? Effect.void : Effect.fail(new LockLost({ ...lease }))))
    )

  /**
   * One fenced UPDATE extends every held lease and raises each one's progress. A lease whose
   * run still has to hear of a cancel is left out when one was requested, so a beat that
   * changed as many rows as it held learnt everything: no lease lost, no cancel. Otherwise one
   * SELECT names the lost leases and the cancels, and the cancelled ones are extended after.
   */
  const extendBatch = (held: ReadonlyArray<HeldLease>, lockTtlMs: number, watchCancel: boolean) => {
    const shaped = paddedForIn(held)
    const ids = shaped.map((entry) => entry.lease.jobId)
    const fences = sql.csv(shaped.map(({ lease }) => sql`(${lease.jobId}, ${lease.workerId}, ${lease.leaseNo})`))
    const progress = sql.join(" ", false)(
      shaped.map(({ lease, progress }) => sql`WHEN ${lease.jobId} THEN ${clampProgress(progress)}`)
    )
    const ignoring = held.filter((entry) => !(watchCancel && entry.reportCancel)).map((entry) => entry.lease.jobId)
    const cancelCondition = ignoring.length === held.length
      ? sql`TRUE`
      : ignoring.length === 0
      ? sql`cancel_requested_at IS NULL`
      : sql`(cancel_requested_at IS NULL OR id IN ${sql.in(paddedForIn(ignoring))})`
    return changedRows(
      sql`UPDATE ai_job SET lock_until = ${plusMillis(lockTtlMs)},
            progress = GREATEST(progress, CASE id ${progress} ELSE progress END), updated_at = ${now}
          WHERE id IN ${sql.in(ids)} AND lifecycle_status = 'running' AND (id, locked_by, lease_no) IN (${fences})
            AND ${cancelCondition}`.raw
    ).pipe(persistence("ai_job.extendLocks"))
  }

  const extendLocks = (held: ReadonlyArray<HeldLease>, lockTtlMs: number) =>
    Effect.gen(function*() {
      if (held.length === 0) return []
      const changed = yield* extendBatch(held, lockTtlMs, true)
      if (changed >= held.length) return held.map((): LeaseBeat => "Extended")
      const rows = yield* readLeaseStates(held.map((entry) => entry.lease.jobId)).pipe(
        persistence("ai_job.extendLocks")
      )
      const byId = new Map(rows.map((row) => [row.id, row]))
      const beats = held.map(({ lease, reportCancel }): LeaseBeat => {
        const row = byId.get(lease.jobId)
        if (
          row === undefined || row.lifecycleStatus !== "running" || row.lockedBy !== lease.workerId ||
          row.leaseNo !== lease.leaseNo
        ) {
          return "Lost"
        }
        return reportCancel && row.cancelRequestedAt !== null ? "CancelRequested" : "Extended"
      })
      const cancelled = held.filter((_, index) => beats[index] === "CancelRequested")
      if (cancelled.length > 0) yield* extendBatch(cancelled, lockTtlMs, false)
      return beats
    })

  /** A hand-off: nobody holds the job and its lock is gone; the next lease costs no attempt. */
  const releaseLock = (lease: JobLease) =>
    leaseWrite("ai_job.releaseLock", lease, sql`locked_by = NULL, lock_until = NULL`)

  const markSucceeded = (
    lease: JobLease,
    outputHash: string,
    options: {
      readonly locked: AiJob
      readonly honourCancel?: boolean
      readonly artifacts?: ReadonlyArray<FinishedArtifact>
    }
  ) =>
    atomically(Effect.flatMap(succeed(lease, outputHash, options), (job) => withFinishedEvent(job, options.artifacts)))

  const succeed = (
    lease: JobLease,
    outputHash: string,
    options: { readonly locked: AiJob; readonly honourCancel?: boolean }
  ) => {
    const honourCancel = options.honourCancel === true
    const cancelCondition = honourCancel ? sql`cancel_requested_at IS NULL` : sql`TRUE`
    return Effect.flatMap(clockDate, (at) =>
      changedRows(
        sql`UPDATE ai_job SET ${status("succeeded")}, progress = 100, output_hash = ${outputHash}, finished_at = ${at},
              lock_until = NULL, updated_at = ${at}
            WHERE ${leaseWhere(lease)} AND ${cancelCondition}`.raw
      ).pipe(
        persistence("ai_job.markSucceeded"),
        Effect.flatMap((changed) => (changed > 0 ? Effect.void : Effect.fail(new LockLost({ ...lease })))),
        // Matched: the row is the locked job with exactly these columns changed, so it is not read back.
        Effect.as(
          new AiJob({
            ...options.locked,
            lifecycleStatus: "succeeded",
            status: legacyStatusOf.succeeded,
            progress: 100,
            outputHash,
            finishedAt: at,
            lockUntil: null,
            updatedAt: at
          }, { disableValidation: true })
        ),
        // Refused: read the row so the guard names why.
        Effect.catchTag("LockLost", () =>
          Effect.flatMap(findById(lease.jobId), (current) =>
            Either.match(succeedGuard(lease, current, honourCancel), {
              onLeft: Effect.fail,
              onRight: () =>
                Effect.fail(new LockLost({ ...lease }))
            })))
      ))
  }

  const terminalByFence = (
    operation: string,
    fence: JobFence,
    set: Fragment,
    guard: (current: Option.Option<AiJob>) => ReturnType<typeof fenceGuard>,
    condition: Fragment = sql`TRUE`
  ) =>
    compareAndSet(
      operation,
      fencedJobId(fence),
      sql`UPDATE ai_job SET ${set}, finished_at = ${now}, lock_until = NULL, updated_at = ${now}
          WHERE ${fenceWhere(fence)} AND ${condition}`.raw,
      guard,
      () =>
        fence._tag === "Lease"
          ? new LockLost({ ...fence.lease })
          : new LockLost({ jobId: fence.jobId, workerId: reaperWorkerId, attempt: fence.attempt })
    )

  const markFailed = (fence: JobFence, failure: JobFailure) =>
    atomically(Effect.flatMap(
      terminalByFence(
        "ai_job.markFailed",
        fence,
        sql`${
          status("failed")
        }, error_code = ${failure.errorCode}, public_error_message = ${failure.publicErrorMessage},
            internal_error_message = ${failure.internalErrorMessage}`,
        (current) => fenceGuard(fence, current, endOfTime, "failed")
      ),
      (job) => withFinishedEvent(job)
    ))

  const markCancelled = (fence: JobFence) =>
    atomically(Effect.flatMap(
      terminalByFence(
        "ai_job.markCancelled",
        fence,
        sql`${status("cancelled")}, error_code = ${cancelledFailure.errorCode},
            public_error_message = ${cancelledFailure.publicErrorMessage}`,
        (current) => cancelGuard(fence, current, endOfTime),
        sql`cancel_requested_at IS NOT NULL`
      ),
      (job) => withFinishedEvent(job)
    ))

  /**
   * One statement decides and writes: a queued job is cancelled, a running one gets its request
   * stamped, anything else is untouched. So the answer (read from `affectedRows`) always matches
   * what was written, however the job moves meanwhile. SET runs left to right: every column is
   * judged on the status before `lifecycle_status` itself changes, last.
   */
  const requestCancel = (jobId: string) =>
    atomically(Effect.gen(function*() {
      const wasQueued = sql`lifecycle_status = 'queued'`
      const requested = yield* changedRows(
        sql`UPDATE ai_job SET
              cancel_requested_at = COALESCE(cancel_requested_at, ${now}),
              finished_at = IF(${wasQueued}, ${now}, finished_at),
              error_code = IF(${wasQueued}, ${cancelledFailure.errorCode}, error_code),
              public_error_message = IF(${wasQueued}, ${cancelledFailure.publicErrorMessage}, public_error_message),
              status = IF(${wasQueued}, ${legacyStatusOf.cancelled}, status),
              updated_at = ${now},
              lifecycle_status = IF(${wasQueued}, 'cancelled', lifecycle_status)
            WHERE id = ${jobId} AND lifecycle_status IN ('queued', 'running')`.raw
      ).pipe(persistence("ai_job.requestCancel"))
      // Written: the request stands, whatever the job did since (a worker may end it now); a
      // queued job ended here, with its event.
      if (requested > 0) {
        return yield* Effect.flatMap(mustFind("ai_job.requestCancel", jobId), (job) => withFinishedEvent(job))
      }
      const current = yield* findById(jobId)
      return yield* Either.match(requestCancelGuard(jobId, current), {
        onLeft: Effect.fail,
        // Nothing matched yet the job is queued or running: it was created or moved in between.
        onRight: (job) =>
          Effect.fail(
            new PersistenceError({
              operation: "ai_job.requestCancel",
              message: `job ${jobId} changed during the cancel (${job.lifecycleStatus})`
            })
          )
      })
    }))

  const findByLifecycleStatus = (
    statuses: ReadonlyArray<LifecycleStatus>,
    options: { readonly queueName?: string; readonly limit?: number } = {}
  ) =>
    statuses.length === 0
      ? Effect.succeed([])
      : selectJobs(
        sql`WHERE lifecycle_status IN ${sql.in(statuses)}
            ${options.queueName === undefined ? sql`` : sql`AND queue_name = ${options.queueName}`}
            ORDER BY created_at, id LIMIT ${options.limit ?? 100}`
      ).pipe(persistence("ai_job.findByLifecycleStatus"))

  const findRetriesOf = (jobId: string) =>
    selectJobs(sql`WHERE retried_from_job_id = ${jobId} ORDER BY created_at, id`).pipe(
      persistence("ai_job.findRetriesOf")
    )

  const findExpiredLocks = (graceMs: number, limit: number) =>
    selectJobs(
      sql`WHERE lifecycle_status = 'running' AND (lock_until IS NULL OR lock_until < ${minusMillis(graceMs)})
          ORDER BY lock_until LIMIT ${limit}`
    ).pipe(persistence("ai_job.findExpiredLocks"))

  const findStaleQueued = (olderThanMs: number, limit: number) =>
    selectJobs(
      sql`WHERE lifecycle_status = 'queued' AND updated_at < ${minusMillis(olderThanMs)}
          ORDER BY updated_at, id LIMIT ${limit}`
    ).pipe(persistence("ai_job.findStaleQueued"))

  const touchQueued = (job: AiJob) =>
    changedRows(
      sql`UPDATE ai_job SET updated_at = ${now}
          WHERE id = ${job.id} AND lifecycle_status = 'queued' AND updated_at = ${job.updatedAt}`.raw
    ).pipe(persistence("ai_job.touchQueued"), Effect.map((changed) => changed > 0))

  const list: AiJobLifecycleRepository["Type"]["list"] = (filter, page) => {
    const clauses: Array<Fragment> = []
    if (filter.userId !== undefined) clauses.push(sql`user_id = ${filter.userId}`)
    if (filter.jobType !== undefined) clauses.push(sql`job_type = ${filter.jobType}`)
    if (filter.statuses !== undefined && filter.statuses.length > 0) {
      clauses.push(sql`lifecycle_status IN ${sql.in(filter.statuses)}`)
    }
    if (filter.queueName !== undefined) clauses.push(sql`queue_name = ${filter.queueName}`)
    if (filter.createdFrom !== undefined) clauses.push(sql`created_at >= ${filter.createdFrom}`)
    if (filter.createdTo !== undefined) clauses.push(sql`created_at < ${filter.createdTo}`)
    if (page.after !== undefined) {
      clauses.push(
        sql`(created_at < ${page.after.createdAt} OR (created_at = ${page.after.createdAt} AND id < ${page.after.id}))`
      )
    }
    const where = clauses.length === 0 ? sql`` : sql`WHERE ${sql.and(clauses)}`
    return selectJobs(sql`${where} ORDER BY created_at DESC, id DESC LIMIT ${page.limit}`).pipe(
      persistence("ai_job.list")
    )
  }

  const count = (operation: string, where: Fragment) =>
    countWhere(where).pipe(
      persistence(operation),
      Effect.map(Option.match({ onNone: () => 0, onSome: (row) => row.total }))
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
      count("ai_job.countActive", sql`user_id = ${userId} AND lifecycle_status IN ('queued', 'running')`),
    countCreatedSince: (userId, since) =>
      count("ai_job.countCreatedSince", sql`user_id = ${userId} AND created_at >= ${since}`)
  })
})

/** Over the `SqlClient` in context; its terminal writes open their transactions through `MysqlUnitOfWork`. */
export const MysqlAiJobLifecycleRepository = Layer.effect(AiJobLifecycleRepository, makeMysqlAiJobLifecycleRepository)
  .pipe(
    Layer.provide(MysqlUnitOfWork)
  )
