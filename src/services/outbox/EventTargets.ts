import { Context, type Effect, Layer, Schema } from "effect"
import type { JobFinishedEvent } from "../../domain/JobFinishedEvent.js"

/**
 * A delivery the target did not acknowledge: an answer other than 2xx, no answer, a queue that
 * refused. `reason` says which in words safe to store and log (a status, a transport error; never
 * the answer's body, a URL's query or a secret).
 */
export class EventDeliveryFailed extends Schema.TaggedError<EventDeliveryFailed>()("EventDeliveryFailed", {
  reason: Schema.String,
  /** How long the target asked to be left alone (`Retry-After`), when it did. */
  retryAfterMs: Schema.optional(Schema.Number)
}) {}

/** One terminal event as a target receives it: its id (the same on every retry) and its body. */
export interface EventDelivery {
  readonly eventId: string
  readonly body: JobFinishedEvent
}

/** One place a job's terminal event goes. */
export interface EventTarget {
  /**
   * Stable across restarts and configuration order: an event records the keys of the targets
   * that acknowledged it (`outbox_event.delivered_to`), so a retry skips them.
   */
  readonly key: string
  /** How logs and `last_error` name it: no query string, credentials or secret. */
  readonly label: string
  /** Succeeds once the target has acknowledged the event (a 2xx answer, a queue add). */
  readonly deliver: (delivery: EventDelivery) => Effect.Effect<void, EventDeliveryFailed>
}

/**
 * Every target of the terminal events: the webhook endpoints and the domain-events queue, as
 * configured. None is a valid deployment: the events are then settled at once.
 */
export class EventTargets
  extends Context.Tag("ai-job-engine/EventTargets")<EventTargets, ReadonlyArray<EventTarget>>()
{
  static readonly none = Layer.succeed(EventTargets, [])
}
