import { SqlSchema } from "@effect/sql"
import type { Fragment } from "@effect/sql/Statement"
import { type Duration, Effect, Schema } from "effect"
import type { JobLease } from "../../../domain/AiJob.js"
import { LockLost } from "../../../domain/LifecycleErrors.js"
import {
  type AiJobLifecycleRepository,
  clampProgress,
  type HeldLease,
  type LeaseBeat
} from "../../../services/AiJobLifecycleRepository.js"
import { changedRows } from "../rows.js"
import { persistence, retryOnLockContention } from "../sqlErrors.js"
import { paddedForIn } from "../statementShapes.js"
import type { LifecycleShared } from "./shared.js"

/** Who holds a row now, read by a beat whose extension matched fewer rows than it held. */
const LeaseState = Schema.Struct({
  id: Schema.String,
  lifecycleStatus: Schema.String,
  lockedBy: Schema.NullOr(Schema.String),
  leaseNo: Schema.Number,
  cancelRequestedAt: Schema.NullOr(Schema.DateFromSelf)
})

/** Holding jobs: the lease keeper's beat over every lease a process holds, and the hand-off's release. */
export const makeLifecycleLeases = (
  { leaseWhere, now, nowPlus, sql }: LifecycleShared
): Pick<AiJobLifecycleRepository["Type"], "extendLocks" | "releaseLock"> => {
  const readLeaseStates = SqlSchema.findAll({
    Request: Schema.Array(Schema.String),
    Result: LeaseState,
    execute: (ids) =>
      sql`SELECT id, lifecycle_status, locked_by, lease_no, cancel_requested_at FROM ai_job WHERE id IN ${
        sql.in(paddedForIn(ids))
      }`
  })

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
  const extendBatch = (held: ReadonlyArray<HeldLease>, lockTtl: Duration.Duration, watchCancel: boolean) => {
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
      sql`UPDATE ai_job SET lock_until = ${nowPlus(lockTtl)},
            progress = GREATEST(progress, CASE id ${progress} ELSE progress END), updated_at = ${now}
          WHERE id IN ${sql.in(ids)} AND lifecycle_status = 'running' AND (id, locked_by, lease_no) IN (${fences})
            AND ${cancelCondition}`.raw
    ).pipe(retryOnLockContention, persistence("ai_job.extendLocks"))
  }

  const extendLocks = (held: ReadonlyArray<HeldLease>, lockTtl: Duration.Duration) =>
    Effect.gen(function*() {
      if (held.length === 0) return []
      const changed = yield* extendBatch(held, lockTtl, true)
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
      if (cancelled.length > 0) yield* extendBatch(cancelled, lockTtl, false)
      return beats
    })

  /** A hand-off: nobody holds the job and its lock is gone; the next lease costs no attempt. */
  const releaseLock = (lease: JobLease) =>
    leaseWrite("ai_job.releaseLock", lease, sql`locked_by = NULL, lock_until = NULL`)

  return { extendLocks, releaseLock }
}
