import { describe, expect, it } from "@effect/vitest"
import { Effect, Option, TestClock } from "effect"
import { ProviderError } from "../../../src/domain/ExecutionError.js"
import { SyntheticGatewayControl } from "../../../src/layers/gateway/SyntheticGateway.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { CancelSignal } from "../../../src/services/CancelSignal.js"
import { ProviderCapacity } from "../../../src/services/ProviderCapacity.js"
import { UsageLog } from "../../../src/services/UsageLog.js"
import { awaitStatus, memoryEngineStack, settle, startEngine } from "../../support/engineStack.js"

const model = "deepseek/deepseek-chat"

const createEcho = (message: string, userId = "user-1") =>
  Effect.flatMap(
    AiJobService,
    (service) =>
      service.createJob({
        userId,
        jobType: "synthetic_echo",
        targetType: "test",
        targetId: message,
        input: { message }
      })
  ).pipe(
    Effect.map(({ job }) => job)
  )

const statusOf = (jobId: string) =>
  Effect.flatMap(AiJobLifecycleRepository, (jobs) => jobs.findById(jobId)).pipe(
    Effect.map((job) => Option.getOrThrow(job))
  )

/** Moves the clock until the provider has been called `count` times. */
const awaitCalls = (count: number) =>
  Effect.gen(function*() {
    const control = yield* SyntheticGatewayControl
    for (let step = 0; step < 2_000 && (yield* control.calls).length < count; step++) {
      yield* TestClock.adjust(10)
      yield* settle
    }
    expect(yield* control.calls).toHaveLength(count)
  })

describe("EXECUTE under the provider limiter (memory layers, TestClock)", () => {
  it.scoped("a call beyond the rpm waits for the window without failing or spending an attempt, and is counted with its reported usage", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      const capacity = yield* ProviderCapacity
      yield* startEngine()
      const first = yield* createEcho("first")
      yield* awaitStatus(first.id, ["succeeded"], { stepMs: 10 })
      const afterFirst = yield* capacity.state(model)
      const [usage] = yield* Effect.flatMap(UsageLog, (log) => log.listByJobId(first.id))
      // The estimate was replaced by what the provider reported.
      expect({
        requests: afterFirst.requestsInWindow,
        tokens: afterFirst.tokensInWindow,
        inFlight: afterFirst.inFlight
      }).toStrictEqual({
        requests: 1,
        tokens: usage?.totalTokens,
        inFlight: 0
      })

      const second = yield* createEcho("second")
      yield* TestClock.adjust(30_000)
      yield* settle
      expect((yield* statusOf(second.id)).lifecycleStatus).toBe("running")
      expect(yield* control.calls).toHaveLength(1)
      expect((yield* capacity.state(model)).waiting).toBe(1)

      const done = yield* awaitStatus(second.id, ["succeeded"], { stepMs: 500 })
      expect(done.attemptCount).toBe(1)
      expect((yield* control.calls).map((call) => [call.jobId, call.attemptNo, call.outcome])).toStrictEqual([
        [first.id, 1, "succeeded"],
        [second.id, 1, "succeeded"]
      ])
    }).pipe(Effect.provide(memoryEngineStack({ limits: { [model]: { rpm: 1 } } }))))

  it.scoped("a job waiting for capacity is cancelled at once and never calls the provider", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      const jobs = yield* AiJobLifecycleRepository
      const cancels = yield* CancelSignal
      yield* control.script([{ _tag: "Hang" }])
      yield* startEngine()
      const holder = yield* createEcho("holder")
      yield* awaitStatus(holder.id, ["running"], { stepMs: 10 })
      yield* TestClock.adjust(100)
      yield* settle
      expect((yield* Effect.flatMap(ProviderCapacity, (capacity) => capacity.state(model))).inFlight).toBe(1)
      const waiting = yield* createEcho("waiting", "user-2")
      yield* awaitStatus(waiting.id, ["running"], { stepMs: 10 })
      yield* TestClock.adjust(100)
      yield* settle
      expect((yield* Effect.flatMap(ProviderCapacity, (capacity) => capacity.state(model))).waiting).toBe(1)

      // As the API cancels a running job: recorded, then published.
      yield* jobs.requestCancel(waiting.id)
      yield* cancels.publish(waiting.id)
      const cancelled = yield* awaitStatus(waiting.id, ["cancelled"], { stepMs: 10, maxSteps: 20 })
      expect(cancelled.lifecycleStatus).toBe("cancelled")
      // The holder's call still hangs (a call is listed when it ends): the waiting job never made one.
      expect(yield* control.calls).toStrictEqual([])
      expect((yield* statusOf(holder.id)).lifecycleStatus).toBe("running")
    }).pipe(Effect.provide(memoryEngineStack({ limits: { [model]: { concurrency: 1 } } }))))

  it.scoped("a 429's Retry-After pauses the model for every call, not just the one that was refused", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      const capacity = yield* ProviderCapacity
      yield* control.script([
        {
          _tag: "Fail",
          error: new ProviderError({ code: "PROVIDER_RATE_LIMITED", message: "429", retryAfterMs: 20_000 })
        }
      ])
      yield* startEngine()
      const refused = yield* createEcho("refused")
      yield* awaitCalls(1)
      const pausedUntil = (yield* capacity.state(model)).pausedUntil
      expect(pausedUntil).toBeGreaterThanOrEqual((yield* TestClock.currentTimeMillis) + 19_000)

      // Another user's job, not retrying anything, still waits for the pause to end.
      const other = yield* createEcho("other", "user-2")
      yield* TestClock.adjust(15_000)
      yield* settle
      expect((yield* control.calls).map((call) => call.jobId)).toStrictEqual([refused.id])
      yield* awaitStatus(other.id, ["succeeded"], { stepMs: 500 })
      yield* awaitStatus(refused.id, ["succeeded"], { stepMs: 500 })
    }).pipe(Effect.provide(memoryEngineStack())))
})
