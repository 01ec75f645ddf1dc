import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Schedule } from "effect"
import { OpenAiCompatibleGatewayLayer } from "../../../src/layers/gateway/OpenAiCompatibleGateway.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { memoryEngineStack, startEngine, testPlatformKey } from "../../support/engineStack.js"
import { makeFakeOpenAiServer } from "../../support/fakeOpenAiServer.js"
import { LogCapture, LogCaptureLayer } from "../../support/logCapture.js"

/**
 * A provider's error body may quote the key it was sent (and anything else). What the engine
 * stores for operators (`internal_error_message`) keeps the status and the error words it knows,
 * never the provider's text or the key.
 */
describe("a provider error that quotes the key", () => {
  it.live("reaches internal_error_message as status and known words only", () =>
    Effect.gen(function*() {
      const fake = yield* makeFakeOpenAiServer({ apiKey: testPlatformKey })
      yield* fake.setScenario({
        _tag: "Status",
        status: 400,
        body: JSON.stringify({
          error: {
            message: `Incorrect API key provided: ${testPlatformKey}. Authorization: Bearer ${testPlatformKey}`,
            type: testPlatformKey,
            code: `Bearer ${testPlatformKey}`
          }
        })
      })
      const gateway = OpenAiCompatibleGatewayLayer({ baseUrl: fake.baseUrl, requestTimeout: Duration.millis(10_000) })
        .pipe(
          Layer.provide(NodeHttpClient.layerUndici)
        )
      yield* Effect.gen(function*() {
        yield* startEngine()
        const { job } = yield* Effect.flatMap(AiJobService, (service) =>
          service.createJob({
            userId: "u",
            jobType: "synthetic_echo",
            targetType: "t",
            targetId: "t",
            input: { message: "hi" }
          }))
        const jobs = yield* AiJobLifecycleRepository
        const failed = yield* jobs.findById(job.id).pipe(
          Effect.flatMap(Option.match({
            onNone: () => Effect.fail("missing"),
            onSome: (found) =>
              found.lifecycleStatus === "failed" ? Effect.succeed(found) : Effect.fail("not failed yet")
          })),
          Effect.retry(Schedule.intersect(Schedule.spaced("50 millis"), Schedule.recurs(400)))
        )
        // A 400 is the provider refusing the request: typed, not retried (not our INTERNAL_ERROR).
        expect(failed.errorCode).toBe("PROVIDER_REQUEST_REJECTED")
        expect(failed.internalErrorMessage).toContain("provider answered HTTP 400")
        expect(failed.internalErrorMessage).not.toContain(testPlatformKey)
        expect(failed.internalErrorMessage).not.toContain("Incorrect API key")
        expect(failed.internalErrorMessage).not.toContain("Bearer")
        const lines = yield* Effect.flatMap(LogCapture, (capture) => capture.lines)
        for (const line of lines) expect(line.includes(testPlatformKey), line.slice(0, 300)).toBe(false)
      }).pipe(Effect.provide(Layer.merge(memoryEngineStack({ gateway }), LogCaptureLayer)))
    }).pipe(Effect.scoped), { timeout: 30_000 })
})
