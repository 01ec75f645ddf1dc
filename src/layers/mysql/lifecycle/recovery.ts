import { type Duration, Effect } from "effect"
import type { AiJob } from "../../../domain/AiJob.js"
import type { AiJobLifecycleRepository } from "../../../services/AiJobLifecycleRepository.js"
import { changedRows } from "../rows.js"
import { persistence } from "../sqlErrors.js"
import type { LifecycleShared } from "./shared.js"

/** The reaper's part: the jobs whose lock or delivery may be lost, and its mark on a queued job it looked after. */
export const makeLifecycleRecovery = (
  { nowMinus, now, selectJobs, sql }: LifecycleShared
): Pick<AiJobLifecycleRepository["Type"], "findExpiredLocks" | "findStaleQueued" | "touchQueued"> => {
  const findExpiredLocks = (grace: Duration.Duration, limit: number) =>
    selectJobs(
      sql`WHERE lifecycle_status = 'running' AND (lock_until IS NULL OR lock_until < ${nowMinus(grace)})
          ORDER BY lock_until LIMIT ${limit}`
    ).pipe(persistence("ai_job.findExpiredLocks"))

  const findStaleQueued = (olderThan: Duration.Duration, limit: number) =>
    selectJobs(
      sql`WHERE lifecycle_status = 'queued' AND updated_at < ${nowMinus(olderThan)}
          ORDER BY updated_at, id LIMIT ${limit}`
    ).pipe(persistence("ai_job.findStaleQueued"))

  const touchQueued = (job: AiJob) =>
    changedRows(
      sql`UPDATE ai_job SET updated_at = ${now}
          WHERE id = ${job.id} AND lifecycle_status = 'queued' AND updated_at = ${job.updatedAt}`.raw
    ).pipe(persistence("ai_job.touchQueued"), Effect.map((changed) => changed > 0))

  return { findExpiredLocks, findStaleQueued, touchQueued }
}
