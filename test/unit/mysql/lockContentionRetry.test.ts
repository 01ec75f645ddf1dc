import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Fiber, Ref, TestClock } from "effect"
import { retryOnLockContention } from "../../../src/layers/mysql/sqlErrors.js"

const driverError = (errno: number) => new SqlError({ cause: Object.assign(new Error(`errno ${errno}`), { errno }) })
const deadlock = driverError(1213)
const lockWaitTimeout = driverError(1205)

/** Fails with `errors` in turn, one a try, then succeeds with the number of tries. */
const failingWith = (tries: Ref.Ref<number>, errors: ReadonlyArray<SqlError>) =>
  Effect.flatMap(Ref.updateAndGet(tries, (n) => n + 1), (n) => {
    const error = errors[n - 1]
    return error === undefined ? Effect.succeed(n) : Effect.fail(error)
  })

/** Runs `effect` to its end, moving the test clock past every backoff. */
const settled = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(Effect.either(effect))
    yield* TestClock.adjust("10 seconds")
    return yield* Fiber.join(fiber)
  })

describe("retryOnLockContention", () => {
  it.effect("a try that succeeds runs once", () =>
    Effect.gen(function*() {
      const tries = yield* Ref.make(0)
      expect(yield* retryOnLockContention(failingWith(tries, []))).toBe(1)
    }))

  it.effect("deadlocks and lock wait timeouts run it again, after a backoff", () =>
    Effect.gen(function*() {
      const tries = yield* Ref.make(0)
      const fiber = yield* Effect.fork(retryOnLockContention(failingWith(tries, [deadlock, lockWaitTimeout])))
      yield* Effect.yieldNow()
      expect(yield* Ref.get(tries)).toBe(1)
      yield* TestClock.adjust("10 seconds")
      expect(yield* Fiber.join(fiber)).toBe(3)
    }))

  it.effect("four retries at most: the fifth try's error is the answer", () =>
    Effect.gen(function*() {
      const tries = yield* Ref.make(0)
      const last = driverError(1205)
      const result = yield* settled(
        retryOnLockContention(failingWith(tries, [deadlock, deadlock, deadlock, deadlock, last, deadlock]))
      )
      expect(result).toEqual(Either.left(last))
      expect(yield* Ref.get(tries)).toBe(5)
    }))

  it.effect("any other error is not retried, first or after a retry", () =>
    Effect.gen(function*() {
      const first = yield* Ref.make(0)
      const duplicate = driverError(1062)
      expect(yield* settled(retryOnLockContention(failingWith(first, [duplicate])))).toEqual(Either.left(duplicate))
      expect(yield* Ref.get(first)).toBe(1)
      const later = yield* Ref.make(0)
      expect(yield* settled(retryOnLockContention(failingWith(later, [deadlock, duplicate])))).toEqual(
        Either.left(duplicate)
      )
      expect(yield* Ref.get(later)).toBe(2)
    }))
})
