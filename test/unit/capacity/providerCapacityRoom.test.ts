import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Option, TestClock } from "effect"
import { ProviderLimitsConfig } from "../../../src/config/ProviderLimitsConfig.js"
import { makeMemoryCapacityStore } from "../../../src/layers/memory/MemoryProviderCapacity.js"
import { type CapacityStore, makeProviderCapacity, storeLimitsOf } from "../../../src/services/ProviderCapacityRoom.js"

const model = "room/model"
const limitsFor = (limit: Parameters<typeof storeLimitsOf>[0]) =>
  Effect.provide(ProviderLimitsConfig, ProviderLimitsConfig.make(limit === undefined ? {} : { [model]: limit }))

describe("provider capacity waiting room", () => {
  it.scoped("a grant that lands after its waiter was interrupted is given back, not kept", () =>
    Effect.gen(function*() {
      const store = makeMemoryCapacityStore()
      const entered = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      // The store answers only when the test opens the gate: the waiter is interrupted meanwhile.
      const gated: CapacityStore = {
        ...store,
        tryAcquire: (input) =>
          Effect.zipRight(
            Effect.zipRight(Deferred.succeed(entered, undefined), Deferred.await(gate)),
            store.tryAcquire(input)
          )
      }
      const capacity = yield* makeProviderCapacity(gated, yield* limitsFor({ concurrency: 1 }))
      const waiter = yield* Effect.fork(
        capacity.acquire({ providerModel: model, userId: "u", priority: "background", estimatedTokens: 10 })
      )
      yield* Deferred.await(entered)
      yield* Fiber.interrupt(waiter)
      yield* Deferred.succeed(gate, undefined)
      // The next caller gets the slot only if the orphaned grant was released.
      const next = yield* capacity.acquire({
        providerModel: model,
        userId: "v",
        priority: "background",
        estimatedTokens: 10
      })
      expect(next.providerModel).toBe(model)
      expect(yield* capacity.state(model)).toMatchObject({
        inFlight: 1,
        requestsInWindow: 1,
        tokensInWindow: 10,
        waiting: 0
      })
    }))

  it.scoped("a permit whose worker died (no refresh) lapses after its lease and frees the slot", () =>
    Effect.gen(function*() {
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
        lease: Duration.millis(3_000),
        now: 0
      })
      expect(crashed.granted).toBe(true)
      const capacity = yield* makeProviderCapacity(store, yield* limitsFor({ concurrency: 1 }), {
        lease: Duration.millis(3_000)
      })
      const waiter = yield* Effect.fork(
        capacity.acquire({ providerModel: model, userId: "u", priority: "interactive", estimatedTokens: 1 })
      )
      yield* TestClock.adjust(2_900)
      expect(Option.isNone(yield* Fiber.poll(waiter))).toBe(true)
      yield* TestClock.adjust(200)
      yield* Fiber.join(waiter)
      // The live worker's own permit outlives its lease: its refresher extends it.
      yield* TestClock.adjust(10_000)
      expect((yield* capacity.state(model)).inFlight).toBe(1)
    }))
})

describe("provider capacity waiting room: wakes on a release only when it can help", () => {
  const counted = (store: CapacityStore) => {
    let calls = 0
    const wrapped: CapacityStore = {
      ...store,
      tryAcquire: (input) => Effect.suspend(() => (calls++, store.tryAcquire(input)))
    }
    return { wrapped, calls: () => calls }
  }
  const waiterOf = (capacity: Effect.Effect.Success<ReturnType<typeof makeProviderCapacity>>, userId: string) =>
    Effect.fork(
      Effect.scoped(capacity.acquire({ providerModel: model, userId, priority: "background", estimatedTokens: 1 }))
    )

  it.scoped("held back by the pace, a finished call asks the store nothing; the clock lets the waiter through", () =>
    Effect.gen(function*() {
      const { calls, wrapped } = counted(makeMemoryCapacityStore())
      const capacity = yield* makeProviderCapacity(wrapped, yield* limitsFor({ rpm: 60 }))
      const first = yield* capacity.acquire({
        providerModel: model,
        userId: "u",
        priority: "background",
        estimatedTokens: 1
      })
      const waiter = yield* waiterOf(capacity, "v")
      yield* TestClock.adjust(10)
      const refused = calls()
      yield* first.release({ _tag: "Succeeded", totalTokens: 1 })
      yield* TestClock.adjust(10)
      expect(calls()).toBe(refused)
      expect(Option.isNone(yield* Fiber.poll(waiter))).toBe(true)
      yield* TestClock.adjust(1_000)
      yield* Fiber.join(waiter)
      expect(calls()).toBe(refused + 1)
    }))

  it.scoped("held back by the pace, a call that was never sent gives its request back and the waiter goes at once", () =>
    Effect.gen(function*() {
      const capacity = yield* makeProviderCapacity(makeMemoryCapacityStore(), yield* limitsFor({ rpm: 60 }))
      const first = yield* capacity.acquire({
        providerModel: model,
        userId: "u",
        priority: "background",
        estimatedTokens: 1
      })
      const waiter = yield* waiterOf(capacity, "v")
      yield* TestClock.adjust(10)
      expect(Option.isNone(yield* Fiber.poll(waiter))).toBe(true)
      yield* first.release({ _tag: "NotSent" })
      yield* Fiber.join(waiter)
    }))

  it.scoped("held back by the concurrency limit, a finished call wakes the waiter at once", () =>
    Effect.gen(function*() {
      const capacity = yield* makeProviderCapacity(makeMemoryCapacityStore(), yield* limitsFor({ concurrency: 1 }))
      const first = yield* capacity.acquire({
        providerModel: model,
        userId: "u",
        priority: "background",
        estimatedTokens: 1
      })
      const waiter = yield* waiterOf(capacity, "v")
      yield* TestClock.adjust(10)
      expect(Option.isNone(yield* Fiber.poll(waiter))).toBe(true)
      yield* first.release({ _tag: "Succeeded", totalTokens: 1 })
      yield* Fiber.join(waiter)
    }))
})
