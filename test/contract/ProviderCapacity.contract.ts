import { describe, expect, layer } from "@effect/vitest"
import { Chunk, Clock, Effect, Fiber, type Layer, Option, Ref, type Scope, TestClock } from "effect"
import type { ProviderLimit } from "../../src/config/ProviderLimitsConfig.js"
import type { CapacityPriority, ProviderCapacity } from "../../src/services/ProviderCapacity.js"
import { capacityPollMs } from "../../src/services/ProviderCapacityRoom.js"

type Capacity = ProviderCapacity["Type"]

export interface ProviderCapacityHarness<R> {
  readonly name: string
  /** The backing every worker of the file shares (a memory store, or Redis under the file's own prefix). */
  readonly layer: Layer.Layer<R, unknown>
  /** One worker's `ProviderCapacity` on that backing, with `limits`, for the life of the scope. */
  readonly worker: (limits: Readonly<Record<string, ProviderLimit>>) => Effect.Effect<Capacity, never, Scope.Scope | R>
}

/**
 * The block shares one TestClock (`layer`). Each test starts an hour after the last one: every
 * sleep a previous test left behind has fired, and instants are read from `t0`.
 */
const start = Effect.zipRight(TestClock.adjust(3_600_000), Clock.currentTimeMillis)

let models = 0
/** A model of its own per test: the backing (and Redis' keys) outlive a test's TestClock. */
const freshModel = () => `contract/model-${process.pid}-${++models}-${Math.floor(Math.random() * 1e6)}`

/** Lets real I/O (Redis) progress while TestClock holds Effect's time still. */
const realTick = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 1)))

/** Waits (on real I/O, at most ~5 s) until `check` holds. */
const eventually = (label: string, check: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 5_000; i++) {
      if (yield* check) return
      yield* realTick
    }
    return yield* Effect.dieMessage(`never happened: ${label}`)
  })

/** At least `count` fibers sleep until `instant`: a waiter was told to come back then. */
const sleepersAt = (instant: number, count = 1) =>
  eventually(
    `${count} sleeper(s) at ${instant}`,
    Effect.map(TestClock.sleeps(), (sleeps) =>
      Chunk.toReadonlyArray(sleeps).filter((at) => at === instant).length >= count)
  )

const waiting = (capacity: Capacity, model: string, count: number) =>
  eventually(`${count} waiting`, Effect.map(capacity.state(model), (state) => state.waiting === count))

const isWaiting = <A, E>(fiber: Fiber.RuntimeFiber<A, E>) => Effect.map(Fiber.poll(fiber), Option.isNone)

const request = (
  providerModel: string,
  userId: string,
  priority: CapacityPriority = "background",
  estimatedTokens = 10
) => ({
  providerModel,
  userId,
  priority,
  estimatedTokens
})

export const providerCapacityContract = <R>(harness: ProviderCapacityHarness<R>) =>
  describe(`ProviderCapacity contract (${harness.name})`, () => {
    layer(harness.layer, { timeout: 60_000 })((it) => {
      it.scoped("a model with no entry in AI_RATE_LIMITS is not limited", () =>
        Effect.gen(function*() {
          const model = freshModel()
          yield* start
          const capacity = yield* harness.worker({})
          yield* Effect.forEach(Array.from({ length: 100 }, (_, i) => i), (i) =>
            capacity.acquire(request(model, `u${i}`)), {
            concurrency: "unbounded"
          })
          expect(yield* capacity.state(model)).toMatchObject({
            inFlight: 100,
            requestsInWindow: 100,
            concurrencyLimit: undefined
          })
        }))

      it.scoped("rpm: the window slides, so no 60 s span sees more than the limit", () =>
        Effect.gen(function*() {
          const model = freshModel()
          const t0 = yield* start
          const capacity = yield* harness.worker({ [model]: { rpm: 2 } })
          yield* capacity.acquire(request(model, "a"))
          yield* TestClock.adjust(30_000)
          yield* capacity.acquire(request(model, "a"))
          const third = yield* Effect.fork(capacity.acquire(request(model, "a")))
          // The first grant leaves the window at 60 s.
          yield* sleepersAt(t0 + 60_000)
          expect(yield* isWaiting(third)).toBe(true)
          expect((yield* capacity.state(model)).requestsInWindow).toBe(2)
          yield* TestClock.adjust(30_000)
          yield* Fiber.join(third)
          // A fixed minute would start afresh at 60 s; the sliding window still holds the 30 s grant.
          const fourth = yield* Effect.fork(capacity.acquire(request(model, "a")))
          yield* sleepersAt(t0 + 90_000)
          expect(yield* isWaiting(fourth)).toBe(true)
          yield* TestClock.adjust(30_000)
          yield* Fiber.join(fourth)
        }))

      it.scoped("rpm is paced: a second grants its share of the minute, so no burst leaves a minute-long gap", () =>
        Effect.gen(function*() {
          const model = freshModel()
          const t0 = yield* start
          // 120 a minute are 2 a second: the third call of the same instant waits for the next second.
          const capacity = yield* harness.worker({ [model]: { rpm: 120 } })
          yield* capacity.acquire(request(model, "a"))
          yield* capacity.acquire(request(model, "b"))
          const third = yield* Effect.fork(capacity.acquire(request(model, "c")))
          yield* sleepersAt(t0 + 1_000)
          expect(yield* isWaiting(third)).toBe(true)
          expect((yield* capacity.state(model)).requestsInWindow).toBe(2)
          yield* TestClock.adjust(1_000)
          yield* Fiber.join(third)
          expect((yield* capacity.state(model)).requestsInWindow).toBe(3)
        }))

      it.scoped("tpm: tokens of the window plus the estimate stay within the limit", () =>
        Effect.gen(function*() {
          const model = freshModel()
          const t0 = yield* start
          const capacity = yield* harness.worker({ [model]: { tpm: 100 } })
          yield* capacity.acquire(request(model, "a", "background", 60))
          const second = yield* Effect.fork(capacity.acquire(request(model, "a", "background", 60)))
          yield* sleepersAt(t0 + 60_000)
          expect(yield* isWaiting(second)).toBe(true)
          expect((yield* capacity.state(model)).tokensInWindow).toBe(60)
          yield* TestClock.adjust(60_000)
          yield* Fiber.join(second)
          expect((yield* capacity.state(model)).tokensInWindow).toBe(60)
        }))

      it.scoped("the usage the provider reports replaces the estimate, both ways", () =>
        Effect.gen(function*() {
          const model = freshModel()
          const t0 = yield* start
          const capacity = yield* harness.worker({ [model]: { tpm: 100 } })
          const overestimated = yield* capacity.acquire(request(model, "a", "background", 90))
          yield* overestimated.release({ _tag: "Succeeded", totalTokens: 20 })
          expect((yield* capacity.state(model)).tokensInWindow).toBe(20)
          // 20 + 80 fits only because the estimate of 90 was corrected.
          const underestimated = yield* capacity.acquire(request(model, "a", "background", 5))
          yield* underestimated.release({ _tag: "Succeeded", totalTokens: 75 })
          expect((yield* capacity.state(model)).tokensInWindow).toBe(95)
          const next = yield* Effect.fork(capacity.acquire(request(model, "a", "background", 10)))
          yield* sleepersAt(t0 + 60_000)
          expect(yield* isWaiting(next)).toBe(true)
          yield* Fiber.interrupt(next)
          // A call that never went out leaves the window altogether.
          const unsent = yield* capacity.acquire(request(model, "b", "background", 5))
          expect((yield* capacity.state(model)).tokensInWindow).toBe(100)
          yield* unsent.release({ _tag: "NotSent" })
          expect(yield* capacity.state(model)).toMatchObject({ tokensInWindow: 95, requestsInWindow: 2, inFlight: 0 })
        }))

      it.scoped("concurrency: a slot frees when its permit is released or its scope ends", () =>
        Effect.gen(function*() {
          const model = freshModel()
          const t0 = yield* start
          const capacity = yield* harness.worker({ [model]: { concurrency: 2 } })
          const first = yield* capacity.acquire(request(model, "a"))
          const scoped = yield* Effect.fork(
            Effect.scoped(Effect.zipRight(capacity.acquire(request(model, "a")), Effect.never))
          )
          yield* eventually("two in flight", Effect.map(capacity.state(model), (state) => state.inFlight === 2))
          const third = yield* Effect.fork(capacity.acquire(request(model, "a")))
          yield* waiting(capacity, model, 1)
          yield* sleepersAt(t0 + capacityPollMs)
          expect(yield* isWaiting(third)).toBe(true)
          yield* first.release({ _tag: "Succeeded", totalTokens: 10 })
          yield* Fiber.join(third)
          expect((yield* capacity.state(model)).inFlight).toBe(2)
          const fourth = yield* Effect.fork(capacity.acquire(request(model, "a")))
          yield* waiting(capacity, model, 1)
          yield* Fiber.interrupt(scoped)
          yield* Fiber.join(fourth)
          expect(yield* capacity.state(model)).toMatchObject({ inFlight: 2, waiting: 0 })
        }))

      it.scoped("a pause holds every worker's calls until it ends, and only ever extends", () =>
        Effect.gen(function*() {
          const model = freshModel()
          const t0 = yield* start
          const a = yield* harness.worker({})
          const b = yield* harness.worker({})
          yield* a.pause(model, t0 + 5_000)
          yield* b.pause(model, t0 + 3_000)
          expect((yield* b.state(model)).pausedUntil).toBe(t0 + 5_000)
          const onA = yield* Effect.fork(a.acquire(request(model, "x", "interactive")))
          const onB = yield* Effect.fork(b.acquire(request(model, "y", "background")))
          yield* sleepersAt(t0 + 5_000, 2)
          expect(yield* isWaiting(onA)).toBe(true)
          expect(yield* isWaiting(onB)).toBe(true)
          yield* TestClock.adjust(5_000)
          yield* Fiber.join(onA)
          // The background call may have asked while the interactive one still waited: it asks again a poll later.
          yield* TestClock.adjust(capacityPollMs)
          yield* Fiber.join(onB)
          expect(yield* a.state(model)).toMatchObject({ inFlight: 2, pausedUntil: 0 })
        }))

      it.scoped("AIMD: +1 per success up to the ceiling, halved by overload at most once a second, never under the floor", () =>
        Effect.gen(function*() {
          const model = freshModel()
          const t0 = yield* start
          const capacity = yield* harness.worker({ [model]: { concurrency: 8, minConcurrency: 2 } })
          const call = (outcome: "Succeeded" | "Overloaded" | "Failed") =>
            Effect.flatMap(capacity.acquire(request(model, "a")), (permit) => permit.release({ _tag: outcome }))
          const limit = Effect.map(capacity.state(model), (state) => state.concurrencyLimit)
          expect(yield* limit).toBe(8)
          yield* call("Overloaded")
          expect(yield* limit).toBe(4)
          yield* call("Overloaded")
          expect(yield* limit).toBe(4)
          yield* call("Failed")
          expect(yield* limit).toBe(4)
          // The lower limit is enforced.
          const held = yield* Effect.forEach([1, 2, 3, 4], () => capacity.acquire(request(model, "a")))
          const fifth = yield* Effect.fork(capacity.acquire(request(model, "a")))
          yield* sleepersAt(t0 + capacityPollMs)
          expect(yield* isWaiting(fifth)).toBe(true)
          yield* Effect.forEach(held, (permit) => permit.release({ _tag: "Failed" }))
          const granted = yield* Fiber.join(fifth)
          yield* granted.release({ _tag: "Failed" })
          yield* TestClock.adjust(1_000)
          yield* call("Overloaded")
          expect(yield* limit).toBe(2)
          yield* TestClock.adjust(1_000)
          yield* call("Overloaded")
          expect(yield* limit).toBe(2)
          for (let i = 0; i < 3; i++) yield* call("Succeeded")
          expect(yield* limit).toBe(5)
          for (let i = 0; i < 10; i++) yield* call("Succeeded")
          expect(yield* limit).toBe(8)
        }))

      it.scoped("interactive calls get a freed slot before background calls that waited longer", () =>
        Effect.gen(function*() {
          const model = freshModel()
          yield* start
          const capacity = yield* harness.worker({ [model]: { concurrency: 1 } })
          const holder = yield* capacity.acquire(request(model, "h"))
          const background = yield* Effect.fork(capacity.acquire(request(model, "a", "background")))
          yield* waiting(capacity, model, 1)
          const interactive = yield* Effect.fork(capacity.acquire(request(model, "b", "interactive")))
          yield* waiting(capacity, model, 2)
          yield* holder.release({ _tag: "Succeeded" })
          const first = yield* Fiber.join(interactive)
          expect(yield* isWaiting(background)).toBe(true)
          yield* first.release({ _tag: "Succeeded" })
          yield* Fiber.join(background)
        }))

      it.scoped("a worker with interactive calls waiting holds back other workers' background calls", () =>
        Effect.gen(function*() {
          const model = freshModel()
          const t0 = yield* start
          const limits = { [model]: { concurrency: 1 } }
          const holderWorker = yield* harness.worker(limits)
          const interactiveWorker = yield* harness.worker(limits)
          const backgroundWorker = yield* harness.worker(limits)
          const holder = yield* holderWorker.acquire(request(model, "h"))
          const interactive = yield* Effect.fork(interactiveWorker.acquire(request(model, "b", "interactive")))
          yield* sleepersAt(t0 + capacityPollMs)
          yield* holder.release({ _tag: "Succeeded" })
          // The slot is free, but an interactive call elsewhere is waiting for it.
          const background = yield* Effect.fork(backgroundWorker.acquire(request(model, "a", "background")))
          yield* sleepersAt(t0 + capacityPollMs, 2)
          expect(yield* isWaiting(background)).toBe(true)
          expect((yield* backgroundWorker.state(model)).inFlight).toBe(0)
          yield* TestClock.adjust(capacityPollMs)
          const granted = yield* Fiber.join(interactive)
          yield* granted.release({ _tag: "Succeeded" })
          yield* TestClock.adjust(capacityPollMs)
          yield* Fiber.join(background)
        }))

      it.scoped("fairness: one user's 200 background calls do not queue ahead of another user's calls", () =>
        Effect.gen(function*() {
          const model = freshModel()
          yield* start
          const capacity = yield* harness.worker({ [model]: { concurrency: 1 } })
          const order = yield* Ref.make<ReadonlyArray<string>>([])
          const call = (userId: string, label: string, priority: CapacityPriority) =>
            Effect.scoped(
              Effect.flatMap(capacity.acquire(request(model, userId, priority)), (permit) =>
                Effect.zipRight(Ref.update(order, (all) => [...all, label]), permit.release({ _tag: "Succeeded" })))
            )
          const holder = yield* capacity.acquire(request(model, "h"))
          const heavy = yield* Effect.forEach(
            Array.from({ length: 200 }, (_, i) => i),
            (i) => Effect.fork(call("heavy", `heavy-${i}`, "background"))
          )
          yield* waiting(capacity, model, 200)
          const lightBackground = yield* Effect.fork(call("light", "light-background", "background"))
          const lightInteractive = yield* Effect.fork(call("light", "light-interactive", "interactive"))
          yield* waiting(capacity, model, 202)
          yield* holder.release({ _tag: "Succeeded" })
          yield* Fiber.join(lightInteractive)
          yield* Fiber.join(lightBackground)
          yield* Fiber.joinAll(heavy)
          const served = yield* Ref.get(order)
          // Interactive first; then the light user's background call after one heavy call, not after 200.
          expect(served.slice(0, 3)).toStrictEqual(["light-interactive", "heavy-0", "light-background"])
          expect(served).toHaveLength(202)
        }))

      it.scoped("a waiter that is interrupted leaves the queue and takes nothing it did not hold", () =>
        Effect.gen(function*() {
          const model = freshModel()
          const t0 = yield* start
          const capacity = yield* harness.worker({ [model]: { concurrency: 1 } })
          const holder = yield* capacity.acquire(request(model, "h"))
          const waiter = yield* Effect.fork(capacity.acquire(request(model, "w")))
          yield* waiting(capacity, model, 1)
          yield* sleepersAt(t0 + capacityPollMs)
          yield* Fiber.interrupt(waiter)
          expect(yield* capacity.state(model)).toMatchObject({ waiting: 0, inFlight: 1, requestsInWindow: 1 })
          yield* holder.release({ _tag: "Succeeded" })
          expect((yield* capacity.state(model)).inFlight).toBe(0)
          yield* capacity.acquire(request(model, "next"))
          expect(yield* capacity.state(model)).toMatchObject({ waiting: 0, inFlight: 1, requestsInWindow: 2 })
        }))
    })
  })
