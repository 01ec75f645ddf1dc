import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Layer, Option } from "effect"
import { ProviderError } from "../../../src/domain/ExecutionError.js"
import { AiGateway, type GenerateResult } from "../../../src/services/AiGateway.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { CancelSignal } from "../../../src/services/CancelSignal.js"
import { UsageLog } from "../../../src/services/UsageLog.js"
import { awaitStatus, memoryEngineStack, settle, startEngine } from "../../support/engineStack.js"

/**
 * What a provider billed is recorded when its answer had arrived, whatever stops the run, and a
 * call that never left the worker has no row (docs/architecture.md §11.5).
 */

const answerOf = (message: string): GenerateResult => ({
  text: JSON.stringify({ echo: message }),
  json: { echo: message },
  usage: { promptTokens: 120, completionTokens: 30, totalTokens: 150 },
  provider: "deepseek",
  model: "deepseek-chat",
  latencyMs: 5,
  finishReason: "stop"
})

/**
 * A provider whose answer has arrived but not been read yet: it is read only when the caller lets
 * pending I/O through (`settle`), as a socket's data is after a timer phase.
 */
const answerWaitingInTheSocket = (called: Deferred.Deferred<void>, inSocket: Deferred.Deferred<GenerateResult>) =>
  Layer.succeed(AiGateway, {
    generate: () => Effect.zipRight(Deferred.succeed(called, undefined), Deferred.await(inSocket)),
    // Delivered, and the work let run until its next wait, as the socket's data is before a check phase.
    settle: Effect.zipRight(Deferred.succeed(inSocket, answerOf("billed")), settle)
  })

const createEcho = (message: string) =>
  Effect.map(
    Effect.flatMap(AiJobService, (service) =>
      service.createJob({
        userId: "user-u",
        jobType: "synthetic_echo",
        targetType: "test",
        targetId: "t",
        input: { message }
      })),
    ({ job }) => job
  )

const rowsOf = (jobId: string) =>
  Effect.map(
    Effect.flatMap(UsageLog, (usage) => usage.listByJobId(jobId)),
    (rows) => rows.map((row) => [row.errorCode, row.totalTokens])
  )

describe("usage rows under faults (memory layers, TestClock)", () => {
  it.scoped("a cancel that arrives as the answer does: the call is recorded with the tokens the provider billed, not CANCELLED with 0", () =>
    Effect.gen(function*() {
      const called = yield* Deferred.make<void>()
      const inSocket = yield* Deferred.make<GenerateResult>()
      yield* Effect.gen(function*() {
        const jobs = yield* AiJobLifecycleRepository
        yield* startEngine()
        const job = yield* createEcho("cancelled as answered")
        yield* awaitStatus(job.id, ["running"], { stepMs: 10 })
        yield* Deferred.await(called)
        yield* jobs.requestCancel(job.id)
        yield* Effect.flatMap(CancelSignal, (cancels) => cancels.publish(job.id))
        const done = yield* awaitStatus(job.id, ["cancelled", "succeeded"], { stepMs: 10 })
        expect(done.lifecycleStatus).toBe("cancelled")
        expect(yield* rowsOf(job.id)).toStrictEqual([[null, 150]])
      }).pipe(Effect.provide(memoryEngineStack({ gateway: answerWaitingInTheSocket(called, inSocket) })))
    }))

  it.scoped("a call whose connection was refused never reached the provider: no usage row", () =>
    Effect.gen(function*() {
      yield* startEngine()
      const job = yield* createEcho("refused")
      const done = yield* awaitStatus(job.id, ["failed", "succeeded"], { stepMs: 500 })
      expect(done.lifecycleStatus).toBe("failed")
      expect(done.errorCode).toBe("PROVIDER_UNAVAILABLE")
      expect(yield* rowsOf(job.id)).toStrictEqual([])
      expect(Option.isSome(yield* Effect.flatMap(AiJobLifecycleRepository, (jobs) => jobs.findById(job.id)))).toBe(true)
    }).pipe(Effect.provide(memoryEngineStack({
      gateway: Layer.succeed(AiGateway, {
        generate: () =>
          Effect.fail(new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: "ECONNREFUSED", sent: false }))
      })
    }))))
})
