import { Effect, Layer } from "effect"
import { OutboxAdmin } from "./OutboxAdmin.js"
import { OutboxRepository } from "./OutboxRepository.js"
import { OutboxSignal } from "./OutboxSignal.js"

export const OutboxAdminLive = Layer.effect(
  OutboxAdmin,
  Effect.gen(function* () {
    const outbox = yield* OutboxRepository
    const signal = yield* OutboxSignal
    return OutboxAdmin.of({
      counts: outbox.countByStatus,
      replayDead: (eventId) =>
        outbox.replayDead(eventId).pipe(
          Effect.tap((event) =>
            Effect.logInfo("Dead outbox event replayed").pipe(
              Effect.annotateLogs({ eventId: event.id, eventType: event.eventType, aggregateId: event.aggregateId }),
              Effect.zipRight(signal.notify)
            )
          )
        )
    })
  })
)
