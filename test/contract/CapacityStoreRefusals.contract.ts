import { describe, expect, layer } from "@effect/vitest"
import { Context, Duration, Effect, type Layer } from "effect"
import type { CapacityStore, StoreLimits, TryAcquireInput } from "../../src/services/ProviderCapacityRoom.js"

const unlimited: StoreLimits = { rpm: undefined, tpm: undefined, ceiling: undefined, floor: 1 }

let models = 0
/** A model of its own per test: Redis keys outlive a test. */
const freshModel = () => `refusals/model-${process.pid}-${++models}-${Math.floor(Math.random() * 1e6)}`

/**
 * What a store says of a refusal besides its instant: whether a permit released before then may
 * let the request through (the waiting room wakes on a release only then). Times are explicit.
 */
export class StoreUnderTest extends Context.Tag("test/CapacityStoreUnderTest")<StoreUnderTest, CapacityStore>() {}

export const capacityStoreRefusalsContract = (name: string, stack: Layer.Layer<StoreUnderTest, unknown>) =>
  describe(`CapacityStore refusals (${name})`, () => {
    layer(stack, { timeout: 30_000 })((it) => {
      const ask = (
        s: CapacityStore,
        providerModel: string,
        limits: StoreLimits,
        now: number,
        overrides: Partial<TryAcquireInput> = {}
      ) =>
        s.tryAcquire({
          providerModel,
          permitId: `p-${now}-${overrides.workerId ?? "w-1"}`,
          tokens: 0,
          priority: "background",
          workerId: "w-1",
          interactiveWaiters: 0,
          limits,
          lease: Duration.millis(30_000),
          now,
          ...overrides
        })
      const refusal = (result: Effect.Effect.Success<ReturnType<CapacityStore["tryAcquire"]>>) =>
        result.granted ? "granted" : { retryAt: result.retryAt, releaseMayFree: result.releaseMayFree }

      it.effect("the concurrency limit and the token window: a release may free the request", () =>
        Effect.gen(function*() {
          const s = yield* StoreUnderTest
          const slots = freshModel()
          const oneSlot = { ...unlimited, ceiling: 1 }
          expect(refusal(yield* ask(s, slots, oneSlot, 0))).toBe("granted")
          expect(refusal(yield* ask(s, slots, oneSlot, 10))).toStrictEqual({ retryAt: 60, releaseMayFree: true })

          const tokens = freshModel()
          const tpm = { ...unlimited, tpm: 100 }
          expect(refusal(yield* ask(s, tokens, tpm, 0, { tokens: 60 }))).toBe("granted")
          expect(refusal(yield* ask(s, tokens, tpm, 10, { tokens: 60 }))).toStrictEqual({
            retryAt: 60_000,
            releaseMayFree: true
          })
        }))

      it.effect("the request window, the pace, a pause and another worker's interactive call: only time frees the request", () =>
        Effect.gen(function*() {
          const s = yield* StoreUnderTest
          const window = freshModel()
          const onePerMinute = { ...unlimited, rpm: 1 }
          expect(refusal(yield* ask(s, window, onePerMinute, 0))).toBe("granted")
          expect(refusal(yield* ask(s, window, onePerMinute, 2_000))).toStrictEqual({
            retryAt: 60_000,
            releaseMayFree: false
          })

          const pace = freshModel()
          const onePerSecond = { ...unlimited, rpm: 60 }
          expect(refusal(yield* ask(s, pace, onePerSecond, 0))).toBe("granted")
          expect(refusal(yield* ask(s, pace, onePerSecond, 500))).toStrictEqual({
            retryAt: 1_000,
            releaseMayFree: false
          })

          const paused = freshModel()
          yield* s.pause(paused, 5_000, 0)
          expect(refusal(yield* ask(s, paused, unlimited, 10))).toStrictEqual({ retryAt: 5_000, releaseMayFree: false })

          const marked = freshModel()
          // Worker 2 is granted one interactive call and has another waiting: its mark holds background calls back.
          expect(
            refusal(
              yield* ask(s, marked, unlimited, 0, { workerId: "w-2", priority: "interactive", interactiveWaiters: 2 })
            )
          )
            .toBe("granted")
          const held = refusal(yield* ask(s, marked, unlimited, 10))
          expect(held).toMatchObject({ releaseMayFree: false })
        }))
    })
  })
