import { Effect, Layer, PubSub } from "effect"
import { type DomainEvent, DomainEvents } from "../../services/DomainEvents.js"

/**
 * A sliding bus: a subscriber that falls behind loses the oldest events, never blocks the engine.
 * Nothing in the engine subscribes today; an event with no subscriber is dropped at once.
 */
export const InProcessDomainEvents = Layer.effect(
  DomainEvents,
  Effect.map(PubSub.sliding<DomainEvent>(1_024), (bus) =>
    DomainEvents.of({
      publish: (event) => PubSub.publish(bus, event).pipe(Effect.asVoid)
    }))
)
