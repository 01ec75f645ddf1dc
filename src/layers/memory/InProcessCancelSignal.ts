import { Effect, Layer, PubSub, Queue, Stream } from "effect"
import { CancelSignal } from "../../services/CancelSignal.js"

/** Cancel requests within one process: a broadcast of job ids that each waiter filters. */
export const makeInProcessCancelSignal = Effect.gen(function*() {
  const cancels = yield* PubSub.unbounded<string>()
  return CancelSignal.of({
    publish: (jobId) => PubSub.publish(cancels, jobId).pipe(Effect.asVoid),
    await: (jobId) =>
      Effect.scoped(
        PubSub.subscribe(cancels).pipe(
          Effect.flatMap((subscription) => Effect.repeat(Queue.take(subscription), { until: (id) => id === jobId }))
        )
      ).pipe(Effect.asVoid),
    subscribe: Effect.map(PubSub.subscribe(cancels), (subscription) => Stream.fromQueue(subscription))
  })
})

export const InProcessCancelSignal = Layer.effect(CancelSignal, makeInProcessCancelSignal)
