import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option, TestClock } from "effect"
import { ProviderLimitsConfig } from "../../../src/config/ProviderLimitsConfig.js"
import { type CapacityStore, makeProviderCapacity, storeLimitsOf } from "../../../src/services/ProviderCapacityRoom.js"
import { makeMemoryCapacityStore } from "../../../src/layers/memory/MemoryProviderCapacity.js"

const model = "room/model"
const limitsFor = (limit: Parameters<typeof storeLimitsOf>[0]) =>
  Effect.provide(ProviderLimitsConfig, ProviderLimitsConfig.make(limit === undefined ? {} : { [model]: limit }))

describe("provider capacity waiting room", () => {
  it.scoped("a grant that lands after its waiter was interrupted is given back, not kept", () =>
    Effect.gen(function* () {
      const store = makeMemoryCapacityStore()
      const entered = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      // The store answers only when the test opens the gate: the waiter is interrupted meanwhile.
      const gated: CapacityStore = {
        ...store,
        tryAcquire: (input) =>
          Effect.zipRight(Effect.zipRight(Deferred.succeed(entered, undefined), Deferred.await(gate)), store.tryAcquire(input))
      }
      const capacity = yield* makeProviderCapacity(gated, yield* limitsFor({ concurrency: 1 }))
      const waiter = yield* Effect.fork(capacity.acquire({ providerModel: model, userId: "u", priority: "background", estimatedTokens: 10 }))
      yield* Deferred.await(entered)
      yield* Fiber.interrupt(waiter)
      yield* Deferred.succeed(gate, undefined)
      // The next caller gets the slot only if the orphaned grant was released.
      const next = yield* capacity.acquire({ providerModel: model, userId: "v", priority: "background", estimatedTokens: 10 })
      expect(next.providerModel).toBe(model)
      expect(yield* capacity.state(model)).toMatchObject({ inFlight: 1, requestsInWindow: 1, tokensInWindow: 10, waiting: 0 })
    }))

  it.scoped("a permit whose worker died (no refresh) lapses after its lease and frees the slot", () =>
    Effect.gen(function* () {
      const store = makeMemoryCapacityStore()
      const limits = storeLimitsOf({ concurrency: 1 })
      // A worker that took the slot and then vanished: nobody refreshes its permit.
      const crashed = yield* store.tryAcquire({
        providerModel: model,
        permitId: "crashed-1",
        tokens: 10,
        priority: "background",
        workerId: "crashed",
        interactiveWaiters: 0,
        limits,
        leaseMs: 3_000,
        now: 0
      })
      expect(crashed.granted).toBe(true)
      const capacity = yield* makeProviderCapacity(store, yield* limitsFor({ concurrency: 1 }), { leaseMs: 3_000 })
      const waiter = yield* Effect.fork(capacity.acquire({ providerModel: model, userId: "u", priority: "interactive", estimatedTokens: 1 }))
      yield* TestClock.adjust(2_900)
      expect(Option.isNone(yield* Fiber.poll(waiter))).toBe(true)
      yield* TestClock.adjust(200)
      yield* Fiber.join(waiter)
      // The live worker's own permit outlives its lease: its refresher extends it.
      yield* TestClock.adjust(10_000)
      expect((yield* capacity.state(model)).inFlight).toBe(1)
    }))
})
