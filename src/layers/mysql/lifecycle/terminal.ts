import { SqlClient, SqlSchema } from "@effect/sql"
import type { Fragment } from "@effect/sql/Statement"
import { Effect, Either, Option, Schema } from "effect"
import { AiJob } from "../../../domain/AiJob.js"
import type { JobFailure, JobFence, JobLease } from "../../../domain/AiJob.js"
import { fencedJobId } from "../../../domain/AiJob.js"
import { FinishedArtifact, finishedEventFor } from "../../../domain/JobFinishedEvent.js"
import { LockLost } from "../../../domain/LifecycleErrors.js"
import {
  cancelGuard,
  cancelledFailure,
  fenceGuard,
  reaperWorkerId,
  requestCancelGuard,
  succeedGuard
} from "../../../domain/LifecycleGuards.js"
import { isTerminal, legacyStatusOf } from "../../../domain/LifecycleStatus.js"
import { PersistenceError } from "../../../domain/PersistenceError.js"
import type { AiJobLifecycleRepository, MarkSucceededOptions } from "../../../services/AiJobLifecycleRepository.js"
import type { UnitOfWork } from "../../../services/UnitOfWork.js"
import type { makeMysqlOutboxRepository } from "../MysqlOutboxRepository.js"
import { changedRows } from "../rows.js"
import { persistence } from "../sqlErrors.js"
import { clockDate, endOfTime, type LifecycleShared } from "./shared.js"

/**
 * Ending jobs: success, failure and cancellation, each written in one transaction with the
 * job's terminal outbox event.
 */
export const makeLifecycleTerminals = (
  { compareAndSet, findById, leaseWhere, nowMinus, mustFind, now, sql, status }: LifecycleShared,
  unitOfWork: UnitOfWork["Type"],
  outbox: Pick<Effect.Effect.Success<typeof makeMysqlOutboxRepository>, "createInTransaction">
): Pick<AiJobLifecycleRepository["Type"], "markSucceeded" | "markFailed" | "markCancelled" | "requestCancel"> => {
  const readArtifacts = SqlSchema.findAll({
    Request: Schema.String,
    Result: FinishedArtifact,
    execute: (jobId) =>
      sql`SELECT artifact_type, artifact_id FROM ai_job_artifact WHERE job_id = ${jobId} ORDER BY ordinal`
  })

  const fenceWhere = (fence: JobFence) =>
    fence._tag === "Lease"
      ? leaseWhere(fence.lease)
      : sql`id = ${fence.jobId} AND lifecycle_status = 'running' AND lease_no = ${fence.leaseNo} AND locked_by <=> ${fence.lockedBy}
          AND (lock_until IS NULL OR lock_until < ${nowMinus(fence.grace)})`

  /**
   * Runs a write that may end a job in one transaction with its terminal event: the
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

  const markSucceeded = (lease: JobLease, outputHash: string, options: MarkSucceededOptions) =>
    atomically(Effect.flatMap(succeed(lease, outputHash, options), (job) => withFinishedEvent(job, options.artifacts)))

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

  return { markSucceeded, markFailed, markCancelled, requestCancel }
}
