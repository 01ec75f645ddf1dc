import { Context, type Duration, type Effect } from "effect"
import type { LifecycleStatus } from "../domain/LifecycleStatus.js"
import type { PersistenceError } from "../domain/PersistenceError.js"

export interface TypeStatusCount {
  readonly jobType: string
  readonly lifecycleStatus: LifecycleStatus
  readonly total: number
}

/** A job that reached a terminal status: what throughput and duration figures are made of. */
export interface FinishedJob {
  readonly jobId: string
  readonly jobType: string
  readonly lifecycleStatus: LifecycleStatus
  readonly startedAt: Date | null
  readonly finishedAt: Date
}

/** Provider usage of one UTC day (`YYYY-MM-DD`), from `ai_usage_log`. */
export interface UsageDay {
  readonly day: string
  readonly calls: number
  readonly totalTokens: number
  readonly costMicros: number
}

/** Read-only aggregates for the operator's statistics. Time is the store's clock. */
export class JobStatistics extends Context.Tag("ai-job-engine/JobStatistics")<
  JobStatistics,
  {
    /** Every (type, status) pair that has at least one job. */
    readonly countsByTypeAndStatus: Effect.Effect<ReadonlyArray<TypeStatusCount>, PersistenceError>
    /** Jobs finished within the last `window`, oldest first, at most `limit`. */
    readonly finishedWithin: (
      window: Duration.Duration,
      limit: number
    ) => Effect.Effect<ReadonlyArray<FinishedJob>, PersistenceError>
    /** Usage per UTC day over the last `days` days (today included), oldest day first; days without calls left out. */
    readonly usageByDay: (days: number) => Effect.Effect<ReadonlyArray<UsageDay>, PersistenceError>
  }
>() {}
