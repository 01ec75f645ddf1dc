import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Metric, Option, Ref, Schedule, TestClock } from "effect"
import {
  CredentialError,
  type ExecutionError,
  InternalError,
  JobTimeoutError,
  ProviderError
} from "../../../src/domain/ExecutionError.js"
import type { JobDefinition } from "../../../src/domain/JobDefinition.js"
import { syntheticEchoDefinition } from "../../../src/jobs/synthetic_echo/definition.js"
import { loggedRetries, retrySchedule } from "../../../src/pipeline/retrySchedule.js"
import { engineRetries, tagged } from "../../../src/services/EngineMetrics.js"
import { LogCapture, LogCaptureLayer } from "../../support/logCapture.js"

const definitionWith = (execution: Partial<JobDefinition["execution"]>): JobDefinition => ({
  ...syntheticEchoDefinition,
  execution: { ...syntheticEchoDefinition.execution, ...execution }
})

const unavailable = new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: "503" })
const internal = new InternalError({ code: "INTERNAL_PERSISTENCE", message: "db" })

/**
 * Runs a call that fails with `errors` in turn (then answers) under `schedule`, moving the
 * TestClock on until it ends; answers the times of the calls and how the run ended.
 */
const callTimes = (schedule: Schedule.Schedule<unknown, unknown>, errors: ReadonlyArray<unknown>) =>
  Effect.gen(function*() {
    const times = yield* Ref.make<ReadonlyArray<number>>([])
    const call = Effect.gen(function*() {
      const made = yield* Ref.updateAndGet(times, (all) => [...all, 0])
      const now = yield* Clock.currentTimeMillis
      yield* Ref.update(times, (all) => [...all.slice(0, -1), now])
      const error = errors[made.length - 1]
      return error === undefined ? "answered" : yield* Effect.fail(error)
    })
    const run = yield* Effect.fork(Effect.either(Effect.retry(call, schedule)))
    for (let step = 0; step < 400 && Option.isNone(yield* Fiber.poll(run)); step++) yield* TestClock.adjust(1_000)
    const ended = yield* Fiber.join(run)
    const at = yield* Ref.get(times)
    return {
      ended: ended._tag === "Right" ? "answered" : "failed",
      gaps: at.slice(1).map((time, index) => time - at[index]!)
    }
  })

describe("the engine's retry schedule", () => {
  it.effect("retries a retryable error up to maxRetries times, exponentially from the definition's delay (jittered)", () =>
    Effect.gen(function*() {
      const schedule = retrySchedule(
        definitionWith({ maxRetries: 3, retryBackoff: { type: "exponential", delay: 10_000 } })
      )
      const { ended, gaps } = yield* callTimes(schedule, [unavailable, unavailable, unavailable, unavailable])
      expect(ended).toBe("failed")
      expect(gaps).toHaveLength(3)
      const bounds = [[8_000, 12_000], [16_000, 24_000], [32_000, 48_000]]
      for (const [index, gap] of gaps.entries()) {
        expect(gap).toBeGreaterThanOrEqual(bounds[index]![0]!)
        expect(gap).toBeLessThanOrEqual(bounds[index]![1]!)
      }
      // Within the budget it ends with the answer.
      expect((yield* callTimes(schedule, [unavailable, unavailable])).ended).toBe("answered")
    }))

  it.effect("never retries a credential error, a timeout under abortStrategy fail, or anything that is not an execution error", () =>
    Effect.gen(function*() {
      const retrying = retrySchedule(definitionWith({ maxRetries: 3, abortStrategy: "retry" }))
      const failing = retrySchedule(definitionWith({ maxRetries: 3, abortStrategy: "fail" }))
      const timeout = new JobTimeoutError({ code: "TIMEOUT", message: "late", timeoutMs: 5 })
      expect((yield* callTimes(retrying, [new CredentialError({ code: "CREDENTIAL_INVALID", message: "401" })])).gaps)
        .toStrictEqual([])
      expect((yield* callTimes(retrying, [{ _tag: "LockLost" }])).gaps).toStrictEqual([])
      expect((yield* callTimes(failing, [timeout])).gaps).toStrictEqual([])
      expect((yield* callTimes(retrying, [timeout])).ended).toBe("answered")
    }))

  it.effect("retries INTERNAL errors once in all, however many retries the definition allows", () =>
    Effect.gen(function*() {
      const schedule = retrySchedule(definitionWith({ maxRetries: 5 }))
      const always = yield* callTimes(schedule, [internal, internal, internal])
      expect([always.ended, always.gaps.length]).toStrictEqual(["failed", 1])
      // Provider errors around one INTERNAL error do not count against it...
      expect((yield* callTimes(schedule, [unavailable, internal, unavailable, unavailable])).ended).toBe("answered")
      // ...but a second INTERNAL error ends it.
      const twice = yield* callTimes(schedule, [internal, unavailable, internal])
      expect([twice.ended, twice.gaps.length]).toStrictEqual(["failed", 2])
    }))

  it.effect("a provider's Retry-After longer than the backoff delays the retry; a shorter one leaves the backoff", () =>
    Effect.gen(function*() {
      const schedule = retrySchedule(
        definitionWith({ maxRetries: 2, retryBackoff: { type: "exponential", delay: 10_000 } })
      )
      const short = new ProviderError({ code: "PROVIDER_RATE_LIMITED", message: "429", retryAfterMs: 1_000 })
      const long = new ProviderError({ code: "PROVIDER_RATE_LIMITED", message: "429", retryAfterMs: 100_000 })
      const [shortGap] = (yield* callTimes(schedule, [short])).gaps
      expect(shortGap).toBeGreaterThanOrEqual(8_000)
      expect((yield* callTimes(schedule, [long])).gaps).toStrictEqual([100_000])
    }))

  it.effect("one schedule per definition, one logged schedule per job type", () =>
    Effect.sync(() => {
      const definition = definitionWith({ maxRetries: 1 })
      const schedule = retrySchedule(definition)
      expect(retrySchedule(definition)).toBe(schedule)
      expect(retrySchedule(definitionWith({ maxRetries: 1 }))).not.toBe(schedule)
      expect(loggedRetries(schedule, "a")).toBe(loggedRetries(schedule, "a"))
      expect(loggedRetries(schedule, "b")).not.toBe(loggedRetries(schedule, "a"))
    }))

  it.effect("each retry granted is counted by job type and error code and logged with its delay; the last failure is not", () =>
    Effect.gen(function*() {
      const counter = Metric.value(
        tagged(engineRetries, { job_type: "retry_test", error_code: "PROVIDER_UNAVAILABLE" })
      )
      const before = (yield* counter).count
      const schedule = loggedRetries(
        retrySchedule(definitionWith({ maxRetries: 2, retryBackoff: { type: "exponential", delay: 10_000 } })),
        "retry_test"
      )
      const { ended } = yield* callTimes(schedule, [unavailable, unavailable, unavailable])
      expect(ended).toBe("failed")
      expect((yield* counter).count - before).toBe(2)
      const lines = (yield* (yield* LogCapture).lines).filter((line) => line.includes("provider call failed, retrying"))
      expect(lines).toHaveLength(2)
      expect(lines[0]).toContain("WARN")
      expect(lines[0]).toContain("errorCode=PROVIDER_UNAVAILABLE")
      // Whole milliseconds: the jittered delay is rounded for the line.
      const delay = Number(/delayMs=(\d+)\b(?!\.)/.exec(lines[0]!)?.[1])
      expect(delay).toBeGreaterThanOrEqual(8_000)
      expect(delay).toBeLessThanOrEqual(12_000)
    }).pipe(Effect.provide(LogCaptureLayer)))

  it.effect("a retry of something that is no execution error is counted as INTERNAL_ERROR", () =>
    Effect.gen(function*() {
      const counter = Metric.value(tagged(engineRetries, { job_type: "retry_any", error_code: "INTERNAL_ERROR" }))
      const before = (yield* counter).count
      const failures: ReadonlyArray<ExecutionError | string> = ["not an execution error"]
      expect((yield* callTimes(loggedRetries(Schedule.recurs(1), "retry_any"), failures)).ended).toBe("answered")
      expect((yield* counter).count - before).toBe(1)
    }))
})
