import { Context, type Effect } from "effect"
import type { LifecycleStatus } from "../domain/LifecycleStatus.js"

/** COMPLETE (docs/architecture.md §8.5): a job reached a terminal state. Ids and hashes only, never content. */
export interface JobFinished {
  readonly _tag: "JobFinished"
  readonly jobId: string
  readonly jobType: string
  readonly userId: string
  readonly status: Extract<LifecycleStatus, "succeeded" | "failed" | "cancelled">
  readonly errorCode: string | null
  readonly outputHash: string | null
  readonly at: Date
}

export type DomainEvent = JobFinished

/** The in-process event bus (synchronous publish). */
export class DomainEvents extends Context.Tag("ai-job-engine/DomainEvents")<
  DomainEvents,
  {
    readonly publish: (event: DomainEvent) => Effect.Effect<void>
  }
>() {}
