import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { makeMemoryCapacityStore } from "../../../src/layers/memory/MemoryProviderCapacity.js"
import type { StoreLimits, TryAcquireInput } from "../../../src/services/ProviderCapacityRoom.js"
import { capacityStoreRefusalsContract, StoreUnderTest } from "../../contract/CapacityStoreRefusals.contract.js"

// The memory twin of the Redis capacity scripts, one operation at a time with explicit times:
// the boundaries (window, pace, tokens, slots, AIMD cooldown, marks) to the millisecond.
const model = "synthetic:echo-1"
const unlimited: StoreLimits = { rpm: undefined, tpm: undefined, ceiling: undefined, floor: 1 }

let permits = 0
const ask = (
  store: ReturnType<typeof makeMemoryCapacityStore>,
  limits: StoreLimits,
  now: number,
  overrides: Partial<TryAcquireInput> = {}
) => {
  const permitId = overrides.permitId ?? `p-${++permits}`
  return Effect.map(
    store.tryAcquire({
      providerModel: model,
      permitId,
      tokens: 0,
      priority: "interactive",
      workerId: "w-1",
      interactiveWaiters: 1,
      limits,
      lease: Duration.millis(30_000),
      now,
      ...overrides
    }),
    (result) => (result.granted ? { granted: permitId } : { retryAt: result.retryAt })
  )
}

describe("makeMemoryCapacityStore", () => {
  it.effect("rpm: a grant counts for exactly 60 s; a full window waits for its oldest grant to age out", () =>
    Effect.gen(function*() {
      const store = makeMemoryCapacityStore()
      const limits = { ...unlimited, rpm: 2 }
      expect(yield* ask(store, limits, 0, { permitId: "a" })).toStrictEqual({ granted: "a" })
      // rpm 2 paces one call a second.
      expect(yield* ask(store, limits, 999)).toStrictEqual({ retryAt: 1_000 })
      expect(yield* ask(store, limits, 1_000, { permitId: "b" })).toStrictEqual({ granted: "b" })
      expect(yield* ask(store, limits, 30_000)).toStrictEqual({ retryAt: 60_000 })
      expect((yield* store.state(model, limits, 59_999)).requestsInWindow).toBe(2)
      expect(yield* ask(store, limits, 59_999)).toStrictEqual({ retryAt: 60_000 })
      expect(yield* ask(store, limits, 60_000, { permitId: "c" })).toStrictEqual({ granted: "c" })
      expect((yield* store.state(model, limits, 60_000)).requestsInWindow).toBe(2)
    }))

  it.effect("pace: a second holds its share of the minute, counted over the last 1000 ms", () =>
    Effect.gen(function*() {
      const store = makeMemoryCapacityStore()
      const limits = { ...unlimited, rpm: 120 }
      expect(yield* ask(store, limits, 0, { permitId: "a" })).toStrictEqual({ granted: "a" })
      expect(yield* ask(store, limits, 400, { permitId: "b" })).toStrictEqual({ granted: "b" })
      expect(yield* ask(store, limits, 500)).toStrictEqual({ retryAt: 1_000 })
      expect(yield* ask(store, limits, 1_000, { permitId: "c" })).toStrictEqual({ granted: "c" })
      expect(yield* ask(store, limits, 1_000)).toStrictEqual({ retryAt: 1_400 })
    }))

  it.effect("tpm: the window's tokens plus the estimate stay within the limit; the wait ends when enough expired", () =>
    Effect.gen(function*() {
      const store = makeMemoryCapacityStore()
      const limits = { ...unlimited, tpm: 100 }
      expect(yield* ask(store, limits, 0, { permitId: "a", tokens: 30 })).toStrictEqual({ granted: "a" })
      expect(yield* ask(store, limits, 1_000, { permitId: "b", tokens: 30 })).toStrictEqual({ granted: "b" })
      // 60 + 60 > 100: once the first 30 expire, 30 + 60 fit.
      expect(yield* ask(store, limits, 2_000, { tokens: 60 })).toStrictEqual({ retryAt: 60_000 })
      // Exactly at the limit fits.
      expect(yield* ask(store, limits, 2_000, { permitId: "c", tokens: 40 })).toStrictEqual({ granted: "c" })
      expect((yield* store.state(model, limits, 2_000)).tokensInWindow).toBe(100)
      expect(yield* ask(store, limits, 2_000, { tokens: 100 })).toStrictEqual({ retryAt: 62_000 })
      expect(yield* ask(store, limits, 2_000, { tokens: 1 })).toStrictEqual({ retryAt: 60_000 })
      // An empty window lets one oversized call through.
      const fresh = makeMemoryCapacityStore()
      expect(yield* ask(fresh, limits, 0, { permitId: "big", tokens: 500 })).toStrictEqual({ granted: "big" })
    }))

  it.effect("release: an unsent call gives back its grant and tokens; reported usage replaces the estimate", () =>
    Effect.gen(function*() {
      const store = makeMemoryCapacityStore()
      const limits = { ...unlimited, rpm: 1_000, tpm: 1_000, ceiling: 10 }
      yield* ask(store, limits, 0, { permitId: "a", tokens: 100 })
      yield* ask(store, limits, 0, { permitId: "b", tokens: 100 })
      yield* store.release({
        providerModel: model,
        permitId: "a",
        outcome: "unsent",
        totalTokens: 999,
        limits,
        now: 10
      })
      expect(yield* store.state(model, limits, 10)).toMatchObject({
        inFlight: 1,
        requestsInWindow: 1,
        tokensInWindow: 100
      })
      yield* store.release({
        providerModel: model,
        permitId: "b",
        outcome: "neutral",
        totalTokens: 250,
        limits,
        now: 10
      })
      expect(yield* store.state(model, limits, 10)).toMatchObject({
        inFlight: 0,
        requestsInWindow: 1,
        tokensInWindow: 250
      })
      yield* ask(store, limits, 20, { permitId: "c", tokens: 100 })
      yield* store.release({
        providerModel: model,
        permitId: "c",
        outcome: "neutral",
        totalTokens: undefined,
        limits,
        now: 30
      })
      expect(yield* store.state(model, limits, 30)).toMatchObject({ requestsInWindow: 2, tokensInWindow: 350 })
      // A permit the store no longer knows changes nothing.
      yield* store.release({
        providerModel: model,
        permitId: "gone",
        outcome: "unsent",
        totalTokens: 5,
        limits,
        now: 40
      })
      expect(yield* store.state(model, limits, 40)).toMatchObject({ requestsInWindow: 2, tokensInWindow: 350 })
    }))

  it.effect("slots: a held permit blocks until it is released or its lease lapses; refresh extends only held permits", () =>
    Effect.gen(function*() {
      const store = makeMemoryCapacityStore()
      const limits = { ...unlimited, ceiling: 2, floor: 1 }
      yield* ask(store, limits, 0, { permitId: "a", lease: Duration.millis(5_000) })
      yield* ask(store, limits, 0, { permitId: "b", lease: Duration.millis(8_000) })
      expect(yield* ask(store, limits, 100)).toStrictEqual({ retryAt: 150 })
      expect(yield* ask(store, limits, 4_990)).toStrictEqual({ retryAt: 5_000 })
      yield* store.refresh(model, ["a", "unknown"], 9_000)
      expect((yield* store.state(model, limits, 5_000)).inFlight).toBe(2)
      expect((yield* store.state(model, limits, 8_000)).inFlight).toBe(1)
      expect(yield* ask(store, limits, 8_000, { permitId: "c" })).toStrictEqual({ granted: "c" })
      yield* store.release({
        providerModel: model,
        permitId: "c",
        outcome: "neutral",
        totalTokens: undefined,
        limits,
        now: 8_100
      })
      expect(yield* ask(store, limits, 8_100, { permitId: "d" })).toStrictEqual({ granted: "d" })
      expect((yield* store.state(model, limits, 9_000)).inFlight).toBe(1)
    }))

  it.effect("AIMD: overload halves the limit at most once a second, never under the floor; success adds one up to the ceiling", () =>
    Effect.gen(function*() {
      const store = makeMemoryCapacityStore()
      const limits = { ...unlimited, ceiling: 5, floor: 2 }
      const limitAt = (now: number) => Effect.map(store.state(model, limits, now), (state) => state.concurrencyLimit)
      const outcome = (o: "success" | "overload", now: number) =>
        store.release({ providerModel: model, permitId: "x", outcome: o, totalTokens: undefined, limits, now })
      expect(yield* limitAt(0)).toBe(5)
      yield* outcome("overload", 10_000)
      expect(yield* limitAt(10_000)).toBe(2.5)
      yield* outcome("overload", 10_999)
      expect(yield* limitAt(10_999)).toBe(2.5)
      // 2.5 allows two slots.
      yield* ask(store, limits, 11_000, { permitId: "a" })
      yield* ask(store, limits, 11_000, { permitId: "b" })
      expect(yield* ask(store, limits, 11_000)).toStrictEqual({ retryAt: 11_050 })
      yield* outcome("overload", 11_000)
      expect(yield* limitAt(11_000)).toBe(2)
      yield* outcome("success", 11_500)
      yield* outcome("success", 11_600)
      yield* outcome("success", 11_700)
      yield* outcome("success", 11_800)
      expect(yield* limitAt(11_800)).toBe(5)
      // Without a ceiling there is no limit to adapt.
      const open = makeMemoryCapacityStore()
      yield* open.release({
        providerModel: model,
        permitId: "x",
        outcome: "overload",
        totalTokens: undefined,
        limits: unlimited,
        now: 0
      })
      expect((yield* open.state(model, unlimited, 0)).concurrencyLimit).toBeUndefined()
    }))

  it.effect("a pause holds every call until it ends and only ever extends", () =>
    Effect.gen(function*() {
      const store = makeMemoryCapacityStore()
      yield* store.pause(model, 5_000, 0)
      yield* store.pause(model, 3_000, 0)
      expect(yield* ask(store, unlimited, 100)).toStrictEqual({ retryAt: 5_000 })
      expect((yield* store.state(model, unlimited, 4_999)).pausedUntil).toBe(5_000)
      expect((yield* store.state(model, unlimited, 5_000)).pausedUntil).toBe(0)
      expect(yield* ask(store, unlimited, 5_000, { permitId: "a" })).toStrictEqual({ granted: "a" })
    }))

  it.effect("another worker's waiting interactive calls hold back background calls until its mark lapses or is withdrawn", () =>
    Effect.gen(function*() {
      const store = makeMemoryCapacityStore()
      // w-1 is granted one of its two interactive waiters: the other keeps its mark for 2 s.
      expect(yield* ask(store, unlimited, 0, { permitId: "i-1", interactiveWaiters: 2 })).toStrictEqual({
        granted: "i-1"
      })
      const background = (now: number, workerId: string, permitId?: string) =>
        ask(store, unlimited, now, {
          priority: "background",
          workerId,
          interactiveWaiters: 0,
          ...(permitId === undefined ? {} : { permitId })
        })
      expect(yield* background(100, "w-2")).toStrictEqual({ retryAt: 150 })
      expect(yield* background(1_999, "w-2")).toStrictEqual({ retryAt: 2_049 })
      expect(yield* background(2_000, "w-2", "b-1")).toStrictEqual({ granted: "b-1" })
      // A grant that leaves no interactive waiter sets no mark.
      expect(yield* ask(store, unlimited, 3_000, { permitId: "i-2", interactiveWaiters: 1 })).toStrictEqual({
        granted: "i-2"
      })
      expect(yield* background(3_000, "w-2", "b-2")).toStrictEqual({ granted: "b-2" })
      // A worker's own mark does not hold back its own background calls.
      yield* ask(store, unlimited, 4_000, { permitId: "i-3", interactiveWaiters: 3 })
      expect(yield* background(4_000, "w-1", "b-3")).toStrictEqual({ granted: "b-3" })
      yield* ask(store, unlimited, 5_000, { permitId: "i-4", interactiveWaiters: 3 })
      expect(yield* background(5_000, "w-2")).toStrictEqual({ retryAt: 5_050 })
      yield* store.withdraw(model, "w-1")
      expect(yield* background(5_000, "w-2", "b-4")).toStrictEqual({ granted: "b-4" })
    }))
})

capacityStoreRefusalsContract("memory", Layer.sync(StoreUnderTest, makeMemoryCapacityStore))
