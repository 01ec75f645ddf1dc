import { Deferred, Effect, Layer, Ref } from "effect"
import { OutboxSignal } from "../../services/outbox/OutboxSignal.js"

/**
 * The wake-up within one process: `notify` completes the current latch; `await` waits on it and
 * arms a fresh one, so a signal raised between two waits is not lost.
 */
export const makeInProcessOutboxSignal = Effect.gen(function*() {
  const latch = yield* Ref.make(yield* Deferred.make<void>())
  const notify = Ref.get(latch).pipe(Effect.flatMap((current) => Deferred.succeed(current, undefined)), Effect.asVoid)
  const awaitSignal = Effect.gen(function*() {
    const current = yield* Ref.get(latch)
    yield* Deferred.await(current)
    const fresh = yield* Deferred.make<void>()
    yield* Ref.update(latch, (latest) => (latest === current ? fresh : latest))
  })
  return OutboxSignal.of({ notify, await: awaitSignal })
})

export const InProcessOutboxSignal = Layer.effect(OutboxSignal, makeInProcessOutboxSignal)
