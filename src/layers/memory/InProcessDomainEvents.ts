import { Effect, Layer, PubSub } from "effect"
import { DomainEvents } from "../../services/DomainEvents.js"

/** A sliding bus: a subscriber that falls behind loses the oldest events, never blocks the engine. */
export const InProcessDomainEvents = Layer.effect(
  DomainEvents,
  Effect.map(PubSub.sliding<import("../../services/DomainEvents.js").DomainEvent>(1_024), (bus) =>
    DomainEvents.of({
      publish: (event) => PubSub.publish(bus, event).pipe(Effect.asVoid),
      subscribe: PubSub.subscribe(bus)
    }))
)
