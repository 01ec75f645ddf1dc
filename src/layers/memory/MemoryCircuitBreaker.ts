import { Context, Effect, Layer, PubSub, Stream } from "effect"
import { CircuitBreakerSettings } from "../../config/CircuitBreakerSettings.js"
import {
  abandonTransition,
  type BreakerRecord,
  type BreakerStore,
  closedRecord,
  failureTransition,
  makeProviderCircuitBreaker,
  probeTransition,
  ProviderCircuitBreaker,
  successTransition,
  worthTelling
} from "../../services/ProviderCircuitBreaker.js"

type Stored = BreakerRecord & { readonly lastFailureAt: number }

const plain = ({ failures, openMs, openUntil, probeUntil, state }: BreakerRecord): BreakerRecord => ({
  state,
  failures,
  openUntil,
  openMs,
  probeUntil
})

/**
 * The memory twin of the Redis breaker store: the same transitions, one synchronous step per
 * operation, and a PubSub for the change messages. Several workers of a simulation share one, as
 * processes share Redis.
 */
export const makeMemoryBreakerStore = Effect.gen(function*() {
  const records = new Map<string, Stored>()
  const changed = yield* PubSub.unbounded<string>()
  const get = (providerModel: string): Stored => records.get(providerModel) ?? { ...closedRecord, lastFailureAt: 0 }

  const write = (providerModel: string, next: Stored) =>
    Effect.suspend(() => {
      const before = get(providerModel)
      if (next.state === "closed" && next.failures === 0) records.delete(providerModel)
      else records.set(providerModel, next)
      return Effect.as(worthTelling(before, next) ? PubSub.publish(changed, providerModel) : Effect.void, {
        record: plain(next),
        from: before.state
      })
    })

  return {
    read: (providerModel) => Effect.sync(() => plain(get(providerModel))),
    tryProbe: (providerModel, now, probeLease) =>
      Effect.suspend(() => {
        const { probe, ...next } = probeTransition(get(providerModel), now, probeLease)
        return Effect.map(
          write(providerModel, { ...next, lastFailureAt: get(providerModel).lastFailureAt }),
          (done) => ({ ...done, probe })
        )
      }),
    recordFailure: (providerModel, now, settings) =>
      Effect.suspend(() => write(providerModel, failureTransition(get(providerModel), now, settings))),
    recordSuccess: (providerModel, _now, sentAt) =>
      Effect.suspend(() => {
        const before = get(providerModel)
        const next = successTransition(before, sentAt)
        return write(providerModel, next === before ? before : { ...next, lastFailureAt: 0 })
      }),
    abandonProbe: (providerModel) =>
      Effect.suspend(() => {
        const before = get(providerModel)
        return write(providerModel, { ...abandonTransition(before), lastFailureAt: before.lastFailureAt })
      }),
    changes: Stream.fromPubSub(changed)
  } satisfies BreakerStore
})

/** The store several in-memory workers share (one per simulated Redis). */
export class MemoryBreakerStore
  extends Context.Tag("ai-job-engine/MemoryBreakerStore")<MemoryBreakerStore, BreakerStore>()
{
  static readonly layer = Layer.effect(MemoryBreakerStore, makeMemoryBreakerStore)
}

/** One process's breaker on the shared `MemoryBreakerStore`. */
export const MemoryCircuitBreaker = Layer.scoped(
  ProviderCircuitBreaker,
  Effect.gen(function*() {
    const store = yield* MemoryBreakerStore
    const settings = yield* CircuitBreakerSettings
    return yield* makeProviderCircuitBreaker(store, settings)
  })
)
