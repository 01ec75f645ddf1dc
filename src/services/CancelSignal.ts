import { Context, type Effect, type Scope, type Stream } from "effect"

/**
 * A cancel request (docs/architecture.md §10) for a running job, published the moment it is
 * recorded (Redis `job:cancel:{jobId}` across processes) so the worker stops within a second.
 * The lease keeper's database check on each beat remains the safety net for a missed message.
 */
export class CancelSignal extends Context.Tag("ai-job-engine/CancelSignal")<
  CancelSignal,
  {
    readonly publish: (jobId: string) => Effect.Effect<void>
    /** Completes when a cancel for `jobId` is published after this call began waiting. */
    readonly await: (jobId: string) => Effect.Effect<void>
    /**
     * Every cancel published from now until the scope closes, as job ids: the lease keeper's one
     * subscription per process, which hands each to the run that holds the job.
     */
    readonly subscribe: Effect.Effect<Stream.Stream<string>, never, Scope.Scope>
  }
>() {}
