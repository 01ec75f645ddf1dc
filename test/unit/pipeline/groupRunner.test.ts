import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { makeGroupRunner } from "../../../src/pipeline/groupRunner.js"

/** A runner whose flushes are recorded and whose first flush waits for `release`. */
const blockedRunner = Effect.gen(function*() {
  const release = yield* Deferred.make<void>()
  const started = yield* Deferred.make<void>()
  const groups: Array<ReadonlyArray<string>> = []
  const submit = yield* makeGroupRunner<string>(
    (group) =>
      Effect.gen(function*() {
        groups.push(group)
        if (groups.length === 1) {
          yield* Deferred.succeed(started, undefined)
          yield* Deferred.await(release)
        }
      }),
    32
  )
  return { submit, release, started, groups }
})

describe("the group runner", () => {
  it.effect("a lone submission is flushed at once, alone", () =>
    Effect.gen(function*() {
      const groups: Array<ReadonlyArray<string>> = []
      const submit = yield* makeGroupRunner<string>((group) => Effect.sync(() => groups.push(group)), 32)
      yield* submit("a")
      yield* submit("b")
      expect(groups).toEqual([["a"], ["b"]])
    }))

  it.effect("what waits behind a flush in flight is flushed as one group", () =>
    Effect.gen(function*() {
      const runner = yield* blockedRunner
      const first = yield* Effect.fork(runner.submit("a"))
      yield* Deferred.await(runner.started)
      const waiters = yield* Effect.forEach(["b", "c"], (item) => Effect.fork(runner.submit(item)))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(runner.release, undefined)
      yield* Fiber.join(first)
      yield* Effect.forEach(waiters, Fiber.join)
      expect(runner.groups).toEqual([["a"], ["b", "c"]])
    }))

  it.live("a waiter stopped before its turn is left out, and the others still get theirs", () =>
    Effect.gen(function*() {
      const runner = yield* blockedRunner
      const first = yield* Effect.fork(runner.submit("a"))
      yield* Deferred.await(runner.started)
      const stopped = yield* Effect.fork(runner.submit("b"))
      const next = yield* Effect.fork(runner.submit("c"))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(stopped)
      yield* Deferred.succeed(runner.release, undefined)
      yield* Fiber.join(first)
      yield* Fiber.join(next).pipe(Effect.timeout("5 seconds"))
      yield* runner.submit("d").pipe(Effect.timeout("5 seconds"))
      expect(runner.groups).toEqual([["a"], ["c"], ["d"]])
    }))
})
