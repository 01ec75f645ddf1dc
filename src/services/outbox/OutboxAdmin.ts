import { Effect } from "effect"
import type { OutboxCounts, OutboxEvent } from "../../domain/OutboxEvent.js"
import type { PersistenceError } from "../../domain/PersistenceError.js"
import { type OutboxEventNotDead, type OutboxEventNotFound, OutboxRepository } from "./OutboxRepository.js"
import { OutboxSignal } from "./OutboxSignal.js"

/** The operator's view of the outbox (for the admin HTTP API). Needs the outbox and its signal. */
export class OutboxAdmin extends Effect.Service<OutboxAdmin>()("ai-job-engine/OutboxAdmin", {
  effect: Effect.gen(function*() {
    const outbox = yield* OutboxRepository
    const signal = yield* OutboxSignal
    /** Events per status: a growing `pending` or any `dead` needs a look. */
    const counts: Effect.Effect<OutboxCounts, PersistenceError> = outbox.countByStatus
    /** A `dead` event back to `pending` with its attempts reset, and the dispatcher woken. */
    const replayDead = (
      eventId: string
    ): Effect.Effect<OutboxEvent, OutboxEventNotFound | OutboxEventNotDead | PersistenceError> =>
      outbox.replayDead(eventId).pipe(
        Effect.tap((event) =>
          Effect.logInfo("Dead outbox event replayed").pipe(
            Effect.annotateLogs({ eventId: event.id, eventType: event.eventType, aggregateId: event.aggregateId }),
            Effect.zipRight(signal.notify)
          )
        )
      )
    /** Every `dead` event back to `pending` in one write; the dispatcher is woken when any was. */
    const replayAllDead: Effect.Effect<number, PersistenceError> = outbox.replayAllDead.pipe(
      Effect.tap((replayed) =>
        replayed === 0
          ? Effect.void
          : Effect.logInfo("Dead outbox events replayed").pipe(
            Effect.annotateLogs({ replayed }),
            Effect.zipRight(signal.notify)
          )
      )
    )
    return { counts, replayDead, replayAllDead }
  })
}) {}
