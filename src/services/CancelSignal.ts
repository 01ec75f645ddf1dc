import { Context, type Effect } from "effect"

/**
 * A cancel request (docs/architecture.md §10) for a running job, published the moment it is
 * recorded (Redis `job:cancel:{jobId}` across processes) so the worker stops within a second.
 * The heartbeat's database check remains the safety net for a missed message.
 */
export class CancelSignal extends Context.Tag("ai-job-engine/CancelSignal")<
  CancelSignal,
  {
    readonly publish: (jobId: string) => Effect.Effect<void>
    /** Completes when a cancel for `jobId` is published after this call began waiting. */
    readonly await: (jobId: string) => Effect.Effect<void>
  }
>() {}
