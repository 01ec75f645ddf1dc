import { describe, expect, layer } from "@effect/vitest"
import { Clock, Duration, Effect, type Layer, type Scope, TestClock } from "effect"
import type { CircuitBreakerSettingsShape } from "../../src/config/CircuitBreakerSettings.js"
import type { Admission, ProviderCircuitBreaker } from "../../src/services/ProviderCircuitBreaker.js"

type Breaker = ProviderCircuitBreaker["Type"]

export interface BreakerHarness<R> {
  readonly name: string
  /** The store every process of the file shares (a memory store, or Redis under the file's own prefix). */
  readonly layer: Layer.Layer<R, unknown>
  /** One process's breaker on that store, for the life of the scope. */
  readonly process: (settings: CircuitBreakerSettingsShape) => Effect.Effect<Breaker, never, Scope.Scope | R>
}

/** The breaker's settings in milliseconds, as the checks below count time. */
const settings = {
  failures: 3,
  windowMs: 10_000,
  openMs: 5_000,
  maxOpenMs: 12_000,
  probeLeaseMs: 20_000
}

const breakerSettings: CircuitBreakerSettingsShape = {
  failures: settings.failures,
  window: Duration.millis(settings.windowMs),
  openDuration: Duration.millis(settings.openMs),
  maxOpenDuration: Duration.millis(settings.maxOpenMs),
  probeLease: Duration.millis(settings.probeLeaseMs)
}

/** Each test starts an hour after the last one, on the block's shared TestClock. */
const start = Effect.zipRight(TestClock.adjust(3_600_000), Clock.currentTimeMillis)

let models = 0
const freshModel = () => `breaker-contract/model-${process.pid}-${++models}-${Math.floor(Math.random() * 1e6)}`

/** Lets real I/O (Redis pub/sub) progress while TestClock holds Effect's time still. */
const realTick = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 2)))

/** What `breaker` would do with a call to `model` now, once it agrees with `expected` (other processes hear of changes by message). */
const eventuallyAdmits = (breaker: Breaker, model: string, expected: Admission["_tag"]) =>
  Effect.gen(function*() {
    let seen: Admission | undefined
    for (let i = 0; i < 2_500; i++) {
      seen = yield* breaker.admit(model)
      if (seen._tag === expected) return seen
      // A probe handed out while waiting would hold the breaker: give it back.
      if (seen._tag === "Probe") yield* breaker.record(model, seen, "abandoned")
      yield* realTick
    }
    return yield* Effect.dieMessage(`${model}: expected ${expected}, still ${seen?._tag}`)
  })

const call: Admission = { _tag: "Call" }

export const providerCircuitBreakerContract = <R>(harness: BreakerHarness<R>) =>
  describe(`ProviderCircuitBreaker contract (${harness.name})`, () => {
    layer(harness.layer, { timeout: 60_000 })((it) => {
      it.scoped("a closed breaker admits every call; a success, or failures further apart than the window, keep it closed", () =>
        Effect.gen(function*() {
          yield* start
          const breaker = yield* harness.process(breakerSettings)
          const model = freshModel()
          expect(yield* breaker.admit(model)).toStrictEqual(call)
          yield* breaker.record(model, call, "failure")
          yield* breaker.record(model, call, "failure")
          yield* breaker.record(model, call, "success")
          yield* breaker.record(model, call, "failure")
          yield* breaker.record(model, call, "failure")
          expect((yield* breaker.view(model)).state).toBe("closed")
          yield* TestClock.adjust(settings.windowMs + 1)
          yield* breaker.record(model, call, "failure")
          expect(yield* breaker.view(model)).toMatchObject({ state: "closed", failures: 1 })
          expect(yield* breaker.admit(model)).toStrictEqual(call)
        }))

      it.scoped("answers to calls sent before the latest failure reset nothing: calls in flight when a provider dies do not hold it shut", () =>
        Effect.gen(function*() {
          const t0 = yield* start
          const breaker = yield* harness.process(breakerSettings)
          const model = freshModel()
          yield* TestClock.adjust(100)
          yield* breaker.record(model, call, "failure")
          yield* breaker.record(model, call, "failure")
          // Sent before the outage, answered after it began.
          yield* breaker.record(model, call, "success", t0)
          expect(yield* breaker.view(model)).toMatchObject({ state: "closed", failures: 2 })
          yield* breaker.record(model, call, "failure")
          expect((yield* breaker.view(model)).state).toBe("open")
          // Once closed again, an answer sent after the last failure does reset the count.
          const other = freshModel()
          yield* breaker.record(other, call, "failure")
          yield* TestClock.adjust(10)
          yield* breaker.record(other, call, "success", yield* Clock.currentTimeMillis)
          expect(yield* breaker.view(other)).toMatchObject({ state: "closed", failures: 0 })
        }))

      it.scoped("failures in a row open it for every process: calls skip the target until the cooldown ends", () =>
        Effect.gen(function*() {
          const t0 = yield* start
          const one = yield* harness.process(breakerSettings)
          const other = yield* harness.process(breakerSettings)
          const model = freshModel()
          expect(yield* other.admit(model)).toStrictEqual(call)
          for (let i = 0; i < settings.failures; i++) yield* one.record(model, call, "failure")
          expect(yield* one.view(model)).toMatchObject({ state: "open", openUntil: t0 + settings.openMs })
          expect(yield* one.admit(model)).toStrictEqual({ _tag: "Skip", retryAt: t0 + settings.openMs })
          expect(yield* eventuallyAdmits(other, model, "Skip")).toStrictEqual({
            _tag: "Skip",
            retryAt: t0 + settings.openMs
          })
          // A call sent before it opened and failing after changes nothing.
          yield* one.record(model, call, "failure")
          expect((yield* one.view(model)).openUntil).toBe(t0 + settings.openMs)
        }))

      it.scoped("after the cooldown one call probes; a success closes it for everyone", () =>
        Effect.gen(function*() {
          yield* start
          const one = yield* harness.process(breakerSettings)
          const other = yield* harness.process(breakerSettings)
          const model = freshModel()
          for (let i = 0; i < settings.failures; i++) yield* one.record(model, call, "failure")
          yield* eventuallyAdmits(other, model, "Skip")
          yield* TestClock.adjust(settings.openMs)
          const probe = yield* one.admit(model)
          expect(probe).toStrictEqual({ _tag: "Probe" })
          // Only one probe at a time: the other process skips while it is out.
          expect((yield* other.admit(model))._tag).toBe("Skip")
          expect((yield* one.view(model)).state).toBe("half_open")
          yield* one.record(model, probe, "success")
          expect(yield* one.view(model)).toMatchObject({ state: "closed", failures: 0 })
          yield* eventuallyAdmits(other, model, "Call")
        }))

      it.scoped("a failed probe opens it again for twice as long, never longer than the cap", () =>
        Effect.gen(function*() {
          yield* start
          const breaker = yield* harness.process(breakerSettings)
          const model = freshModel()
          for (let i = 0; i < settings.failures; i++) yield* breaker.record(model, call, "failure")
          const cooldowns: Array<number> = []
          for (let round = 0; round < 3; round++) {
            const opened = yield* breaker.view(model)
            yield* TestClock.adjust(opened.openUntil - (yield* Clock.currentTimeMillis))
            const probe = yield* breaker.admit(model)
            expect(probe._tag).toBe("Probe")
            yield* breaker.record(model, probe, "failure")
            const now = yield* Clock.currentTimeMillis
            const reopened = yield* breaker.view(model)
            expect(reopened.state).toBe("open")
            cooldowns.push(reopened.openUntil - now)
          }
          expect(cooldowns).toStrictEqual([10_000, 12_000, 12_000])
        }))

      it.scoped("a probe stopped before its answer lets the next call probe at once; a probe that never reports lapses", () =>
        Effect.gen(function*() {
          yield* start
          const breaker = yield* harness.process(breakerSettings)
          const model = freshModel()
          for (let i = 0; i < settings.failures; i++) yield* breaker.record(model, call, "failure")
          yield* TestClock.adjust(settings.openMs)
          const first = yield* breaker.admit(model)
          expect(first._tag).toBe("Probe")
          yield* breaker.record(model, first, "abandoned")
          const second = yield* breaker.admit(model)
          expect(second._tag).toBe("Probe")
          // Its worker died: nothing is recorded, and after the probe's lease another call may try.
          expect((yield* breaker.admit(model))._tag).toBe("Skip")
          yield* TestClock.adjust(settings.probeLeaseMs)
          expect((yield* breaker.admit(model))._tag).toBe("Probe")
        }))

      it.scoped("a 429 or an output the job rejects is an answer: a probe that gets one closes the breaker", () =>
        Effect.gen(function*() {
          yield* start
          const breaker = yield* harness.process(breakerSettings)
          const model = freshModel()
          for (let i = 0; i < settings.failures; i++) yield* breaker.record(model, call, "failure")
          yield* TestClock.adjust(settings.openMs)
          const probe = yield* breaker.admit(model)
          yield* breaker.record(model, probe, "success")
          expect((yield* breaker.view(model)).state).toBe("closed")
        }))
    })
  })
