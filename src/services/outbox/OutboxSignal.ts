import { Context, type Effect } from "effect"

/**
 * A wake-up (docs/architecture.md §6.6) for the outbox dispatcher, raised after a transaction that
 * wrote outbox events commits, so dispatch does not wait for the next poll. In one process it
 * is an in-memory signal; across processes it rides Redis pub/sub. Losing a signal costs at
 * most one poll interval: polling stays the safety net.
 */
export class OutboxSignal extends Context.Tag("ai-job-engine/OutboxSignal")<
  OutboxSignal,
  {
    /** Says that new events are ready. Never fails: a lost signal only delays dispatch. */
    readonly notify: Effect.Effect<void>
    /** Waits until a signal arrives (returns at once if one arrived since the last wait). */
    readonly await: Effect.Effect<void>
  }
>() {}
