import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option } from "effect"
import { defineJobType } from "../../../src/domain/JobType.js"
import { jobCatalog } from "../../../src/jobs/catalog.js"
import { syntheticEchoDefinition, SyntheticEchoInput } from "../../../src/jobs/synthetic_echo/definition.js"
import { syntheticEchoJobType } from "../../../src/jobs/synthetic_echo/index.js"
import { SyntheticEchoOutput } from "../../../src/jobs/synthetic_echo/output.js"
import { OpenAiCompatibleGatewayLayer } from "../../../src/layers/gateway/OpenAiCompatibleGateway.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { definePromptTemplate } from "../../../src/services/PromptTemplates.js"
import { UsageLog } from "../../../src/services/UsageLog.js"
import { memoryEngineStack, startEngine, testPlatformKey } from "../../support/engineStack.js"
import { makeFakeOpenAiServer } from "../../support/fakeOpenAiServer.js"

/** An echo job with a one-second limit whose timeout fails the job (abortStrategy `fail`). */
const quickEcho = {
  ...syntheticEchoJobType,
  spec: defineJobType({
    definition: {
      ...syntheticEchoDefinition,
      jobType: "quick_echo",
      execution: { ...syntheticEchoDefinition.execution, timeoutMs: 1_000, abortStrategy: "fail" }
    },
    input: SyntheticEchoInput,
    output: SyntheticEchoOutput
  }),
  prompts: [
    definePromptTemplate({
      jobType: "quick_echo",
      version: "v1",
      input: SyntheticEchoInput,
      render: ({ input }) => [{ role: "user", content: input.message }]
    })
  ]
}

describe("EXECUTE's timeout against a real HTTP provider", () => {
  it.live("interrupts the provider call: the server sees the request aborted, and the job fails with TIMEOUT", () =>
    Effect.gen(function*() {
      const fake = yield* makeFakeOpenAiServer({ apiKey: testPlatformKey })
      yield* fake.setScenario({ _tag: "Slow", delayMs: 20_000 })
      const gateway = OpenAiCompatibleGatewayLayer({ baseUrl: fake.baseUrl, requestTimeout: Duration.millis(60_000) })
        .pipe(
          Layer.provide(NodeHttpClient.layerUndici)
        )
      yield* Effect.gen(function*() {
        yield* startEngine()
        const { job } = yield* Effect.flatMap(
          AiJobService,
          (service) =>
            service.createJob({
              userId: "u",
              jobType: "quick_echo",
              targetType: "t",
              targetId: "t",
              input: { message: "hi" }
            })
        )
        const aborted = yield* fake.aborted.pipe(Effect.timeout("10 seconds"))
        expect(aborted.aborted).toBe(true)
        const jobs = yield* AiJobLifecycleRepository
        let status = ""
        for (let i = 0; i < 100 && status !== "failed"; i++) {
          status = Option.getOrThrow(yield* jobs.findById(job.id)).lifecycleStatus
          if (status !== "failed") yield* Effect.sleep("50 millis")
        }
        const failed = Option.getOrThrow(yield* jobs.findById(job.id))
        expect(failed.lifecycleStatus).toBe("failed")
        expect(failed.errorCode).toBe("TIMEOUT")
        const usage = yield* Effect.flatMap(UsageLog, (log) => log.listByJobId(job.id))
        expect(usage.map((row) => row.errorCode)).toStrictEqual(["TIMEOUT"])
      }).pipe(Effect.provide(memoryEngineStack({ modules: [...jobCatalog, quickEcho], gateway })))
    }).pipe(Effect.scoped))
})
