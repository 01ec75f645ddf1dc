import { SqlSchema } from "@effect/sql"
import { Duration, Effect, Option, Schema } from "effect"
import { AiJob } from "../../../domain/AiJob.js"
import { JobSnapshot } from "../../../domain/JobSnapshot.js"
import { JobLockConflict } from "../../../domain/LifecycleErrors.js"
import { lockGuard, takeOverGuard } from "../../../domain/LifecycleGuards.js"
import { legacyStatusOf } from "../../../domain/LifecycleStatus.js"
import { PersistenceError } from "../../../domain/PersistenceError.js"
import {
  type AiJobLifecycleRepository,
  clampProgress,
  type LockedWithSnapshot,
  type QueuedLockRequest
} from "../../../services/AiJobLifecycleRepository.js"
import type { UnitOfWork } from "../../../services/UnitOfWork.js"
import { AiJobColumns, changedRows, JsonColumn } from "../rows.js"
import { persistence } from "../sqlErrors.js"
import { paddedForIn } from "../statementShapes.js"
import { endOfTime, type LifecycleShared } from "./shared.js"

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

/** Taking jobs: a first lock (`queued → running`), alone or for a group of deliveries, and the take-over of a `running` one. */
export const makeLifecycleLocks = (
  { compareAndSet, now, nowPlus, sql, status }: LifecycleShared,
  unitOfWork: UnitOfWork["Type"]
): Pick<AiJobLifecycleRepository["Type"], "lockJob" | "lockQueued" | "takeOver"> => {
  const selectWithSnapshot = SqlSchema.findOne({
    Request: Schema.String,
    Result: JobWithSnapshotRow,
    execute: (jobId) =>
      sql`SELECT j.*, s.id AS snapshot_row_id, s.content AS snapshot_content, s.redaction_version AS snapshot_redaction_version,
            s.expires_at AS snapshot_expires_at, s.created_at AS snapshot_created_at
          FROM ai_job j LEFT JOIN ai_job_snapshot s ON s.job_id = j.id
          WHERE j.id = ${jobId}`
  })
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

  /** Progress raised to `progress` when given (never lowered); otherwise left as it is. */
  const raisedProgress = (progress: number | undefined) =>
    progress === undefined ? sql`progress = progress` : sql`progress = GREATEST(progress, ${clampProgress(progress)})`

  /** What a first lock sets: `queued → running`, a new lease and attempt, the lock's times. */
  const firstLockSet = (workerId: string, lockTtl: Duration.Duration, progress: number | undefined) =>
    sql`${status("running")}, ${raisedProgress(progress)}, locked_by = ${workerId}, locked_at = ${now},
        lock_until = ${nowPlus(lockTtl)}, started_at = COALESCE(started_at, ${now}),
        attempt_count = attempt_count + 1, lease_no = lease_no + 1, updated_at = ${now}`

  const lockJob = (jobId: string, workerId: string, lockTtl: Duration.Duration, progress?: number) =>
    compareAndSet(
      "ai_job.lock",
      jobId,
      sql`UPDATE ai_job SET ${
        firstLockSet(workerId, lockTtl, progress)
      } WHERE id = ${jobId} AND lifecycle_status = 'queued'`.raw,
      (current) => lockGuard(jobId, current),
      () => new JobLockConflict({ jobId })
    )

  const lockOneQueued = (
    request: QueuedLockRequest,
    workerId: string,
    lockTtl: Duration.Duration,
    progress: number | undefined
  ) =>
    changedRows(
      sql`UPDATE ai_job SET ${firstLockSet(workerId, lockTtl, progress)}
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
   * row and judges it as a lone one does. The answers are the rows read with what the UPDATE set,
   * so nothing is read back.
   */
  const lockGroupQueued = (
    requests: ReadonlyArray<QueuedLockRequest>,
    workerId: string,
    lockTtl: Duration.Duration,
    progress: number | undefined
  ) =>
    unitOfWork.transaction(Effect.gen(function*() {
      const rows = yield* selectQueuedForLock(requests.map((request) => request.jobId)).pipe(persistence("ai_job.lock"))
      const wanted = new Map<string, string>()
      for (const request of requests) if (!wanted.has(request.jobId)) wanted.set(request.jobId, request.jobType)
      const ours = rows.filter((row) => wanted.get(row.locked.job.id) === row.locked.job.jobType)
      const at = ours[0]?.lockedAt
      if (at === undefined) return requests.map(() => Option.none<LockedWithSnapshot>())
      const lockUntil = new Date(at.getTime() + Math.round(Duration.toMillis(lockTtl)))
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

  const lockQueued: AiJobLifecycleRepository["Type"]["lockQueued"] = (requests, workerId, lockTtl, progress) =>
    requests.length === 0
      ? Effect.succeed([])
      : requests.length === 1
      ? Effect.map(lockOneQueued(requests[0]!, workerId, lockTtl, progress), (locked) => [locked])
      : lockGroupQueued(requests, workerId, lockTtl, progress)

  const takeOver = (jobId: string, workerId: string, lockTtl: Duration.Duration, progress?: number) =>
    compareAndSet(
      "ai_job.takeOver",
      jobId,
      // A crashed holder's expired lock costs an attempt; a released one (locked_by NULL, a
      // hand-off) does not. SET runs left to right, so the attempt is judged before locked_by changes.
      sql`UPDATE ai_job SET attempt_count = attempt_count + IF(locked_by IS NULL, 0, 1), lease_no = lease_no + 1, ${
        raisedProgress(progress)
      },
            locked_by = ${workerId}, locked_at = ${now}, lock_until = ${nowPlus(lockTtl)}, updated_at = ${now}
          WHERE id = ${jobId} AND lifecycle_status = 'running'
            AND (locked_by IS NULL OR ((lock_until IS NULL OR lock_until < ${now}) AND attempt_count < max_attempts))`
        .raw,
      (current) => takeOverGuard(jobId, current, endOfTime),
      () => new JobLockConflict({ jobId })
    )

  return { lockJob, lockQueued, takeOver }
}
