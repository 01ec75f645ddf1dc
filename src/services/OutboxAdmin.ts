import { Context, type Effect } from "effect"
import type { OutboxCounts, OutboxEvent } from "../domain/OutboxEvent.js"
import type { PersistenceError } from "../domain/PersistenceError.js"
import type { OutboxEventNotDead, OutboxEventNotFound } from "./OutboxRepository.js"

/** The operator's view of the outbox (for the admin HTTP API). */
export class OutboxAdmin extends Context.Tag("ai-job-engine/OutboxAdmin")<
  OutboxAdmin,
  {
    /** Events per status: a growing `pending` or any `dead` needs a look. */
    readonly counts: Effect.Effect<OutboxCounts, PersistenceError>
    /** A `dead` event back to `pending` with its attempts reset, and the dispatcher woken. */
    readonly replayDead: (
      eventId: string
    ) => Effect.Effect<OutboxEvent, OutboxEventNotFound | OutboxEventNotDead | PersistenceError>
  }
>() {}
