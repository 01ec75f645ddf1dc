import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Option, TestClock } from "effect"
import { outputHash } from "../../../src/domain/CanonicalJson.js"
import { ContentSafetyError, ProviderError, ValidationError } from "../../../src/domain/ExecutionError.js"
import { estimateTokens, execute } from "../../../src/pipeline/execute.js"
import { prepare } from "../../../src/pipeline/prepare.js"
import { resolve } from "../../../src/pipeline/resolve.js"
import {
  AiGateway,
  type GatewayError,
  type GenerateRequest,
  type GenerateResult
} from "../../../src/services/AiGateway.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { ContentSafety } from "../../../src/services/ContentSafety.js"
import { payloadFor } from "../../../src/services/JobQueue.js"
import { PromptTemplates } from "../../../src/services/PromptTemplates.js"
import { type CapacityOutcome, type CapacityRequest, ProviderCapacity } from "../../../src/services/ProviderCapacity.js"
import { UsageLog } from "../../../src/services/UsageLog.js"
import { memoryEngineStack } from "../../support/engineStack.js"
import { LogCapture, LogCaptureLayer } from "../../support/logCapture.js"

/** What the provider and the limiter were asked, and what the limiter was told. */
interface Seen {
  readonly requests: Array<GenerateRequest>
  readonly acquired: Array<CapacityRequest>
  readonly released: Array<CapacityOutcome>
  readonly paused: Array<readonly [string, number]>
}

/** A provider that answers each call with the next of `answers` (an answer, an error, or no answer ever). */
const recordingStack = (seen: Seen, answers: Array<GenerateResult | GatewayError | "hang">) =>
  memoryEngineStack({
    gateway: Layer.succeed(AiGateway, {
      generate: (request) =>
        Effect.suspend(() => {
          seen.requests.push(request)
          const next = answers.shift()
          if (next === undefined || next === "hang") return Effect.never
          return "_tag" in next ? Effect.fail(next) : Effect.succeed(next)
        })
    }),
    capacity: Layer.succeed(ProviderCapacity, {
      acquire: (request) =>
        Effect.sync(() => {
          seen.acquired.push(request)
          return {
            id: `permit-${seen.acquired.length}`,
            providerModel: request.providerModel,
            estimatedTokens: request.estimatedTokens,
            release: (outcome) => Effect.sync(() => void seen.released.push(outcome))
          }
        }),
      pause: (providerModel, untilMs) => Effect.sync(() => void seen.paused.push([providerModel, untilMs])),
      state: () => Effect.die("not used")
    })
  })

const newSeen = (): Seen => ({ requests: [], acquired: [], released: [], paused: [] })

const answerOf = (json: unknown): GenerateResult => ({
  text: JSON.stringify(json),
  json,
  usage: { promptTokens: 11, completionTokens: 7, totalTokens: 18 },
  provider: "deepseek",
  model: "deepseek-chat",
  latencyMs: 40,
  finishReason: "stop"
})

const resolvedJob = (jobType: string, input: unknown) =>
  Effect.gen(function*() {
    const { job } = yield* Effect.flatMap(AiJobService, (service) =>
      service.createJob({ userId: "user-7", jobType, targetType: "test", targetId: "t", input }))
    const payload = payloadFor({ jobId: job.id, jobType: job.jobType, createdAt: job.createdAt })
    return yield* resolve(Option.getOrThrow(yield* prepare(payload, "worker-1", Duration.millis(60_000))))
  })

const flashcards = { flashcards: [{ front: "What does photosynthesis turn light into?", back: "Chemical energy." }] }

const usageRows = (jobId: string) => Effect.flatMap(UsageLog, (usage) => usage.listByJobId(jobId))

describe("EXECUTE, one attempt (memory layers, a recording provider and limiter)", () => {
  it("estimates a call's tokens at a quarter of the prompt's characters, rounded up, plus the completion", () => {
    expect(estimateTokens([], undefined)).toBe(1_000)
    expect(estimateTokens([{ role: "user", content: "abcde" }], 10)).toBe(12)
    expect(estimateTokens([{ role: "system", content: "abc" }, { role: "user", content: "abcd" }], undefined)).toBe(
      1_002
    )
    expect(estimateTokens([{ role: "user", content: "abcdefgh" }], 0)).toBe(2)
  })

  it.scoped("asks the limiter for the route's model at the queue's priority, then the provider with the job's call, route and prompt", () => {
    const seen = newSeen()
    return Effect.gen(function*() {
      const resolved = yield* resolvedJob("synthetic_echo", { message: "say this" })
      const executed = yield* execute(resolved, 2, ["echo must repeat the message exactly"])
      const prompt = yield* Effect.flatMap(PromptTemplates, (templates) =>
        templates.render({
          jobType: "synthetic_echo",
          promptVersion: resolved.job.promptVersion,
          content: resolved.content,
          problems: ["echo must repeat the message exactly"]
        }))
      expect(seen.acquired).toStrictEqual([{
        providerModel: `${resolved.route.provider}/${resolved.route.model}`,
        estimatedTokens: estimateTokens(prompt.messages, resolved.route.maxTokens),
        priority: "interactive",
        userId: "user-7",
        // A pause may hold the call for no longer than the job's own time budget.
        maxPaused: Duration.millis(30_000)
      }])
      expect(seen.requests).toStrictEqual([{
        job: { id: resolved.job.id, type: "synthetic_echo", attemptNo: 2, leaseNo: resolved.lease.leaseNo },
        messages: prompt.messages,
        provider: resolved.route.provider,
        model: resolved.route.model,
        credential: resolved.credential,
        temperature: resolved.route.temperature,
        maxTokens: resolved.route.maxTokens,
        jsonMode: resolved.route.jsonMode,
        input: resolved.content,
        outputSchema: { name: "synthetic_echo", schema: resolved.registered.outputJsonSchema }
      }])
      expect(seen.released).toStrictEqual([{ _tag: "Succeeded", totalTokens: 18 }])
      expect(seen.paused).toStrictEqual([])
      expect(executed.output).toStrictEqual({ echo: "say this" })
      expect(executed.outputHash).toBe(outputHash({ echo: "say this" }))
      expect([executed.usage.attemptNo, executed.usage.totalTokens, executed.usage.errorCode]).toStrictEqual([
        2,
        18,
        null
      ])
      // The successful call's row is PROJECT's to write.
      expect(yield* usageRows(resolved.job.id)).toStrictEqual([])
      const [validated] = (yield* Effect.flatMap(LogCapture, (capture) => capture.lines)).filter((line) =>
        line.includes("output validated")
      )
      expect(validated).toContain(`outputHash=${executed.outputHash}`)
      expect(validated).toContain("stage=EXECUTE")
      expect(validated).toContain("attempt=2")
    }).pipe(Effect.provide(LogCaptureLayer), Effect.provide(recordingStack(seen, [answerOf({ echo: "say this" })])))
  })

  it.scoped("a background job type waits at background priority, and its input and output pass the safety check", () => {
    const seen = newSeen()
    const checked: Array<[string, string]> = []
    return Effect.gen(function*() {
      const resolved = yield* resolvedJob("flashcard_generation", {
        sourceText: "Photosynthesis turns light into chemical energy.",
        count: 1,
        deckId: "deck-1"
      })
      const executed = yield* execute(resolved, 1, []).pipe(
        Effect.updateService(ContentSafety, (safety) =>
          ContentSafety.make({
            check: (request) =>
              Effect.zipRight(
                Effect.sync(() => void checked.push([request.stage, JSON.stringify(request.content)])),
                safety.check(request)
              )
          }))
      )
      expect(seen.acquired.map((request) => request.priority)).toStrictEqual(["background"])
      expect(checked).toStrictEqual([["input", JSON.stringify(resolved.content)], [
        "output",
        JSON.stringify(flashcards)
      ]])
      expect(executed.output).toStrictEqual(flashcards)
    }).pipe(Effect.provide(recordingStack(seen, [answerOf(flashcards)])))
  })

  it.scoped("a job type without the safety check is never checked", () => {
    const seen = newSeen()
    const checked: Array<string> = []
    return Effect.gen(function*() {
      const resolved = yield* resolvedJob("synthetic_echo", { message: "unchecked" })
      yield* execute(resolved, 1, []).pipe(
        Effect.updateService(ContentSafety, () =>
          ContentSafety.make({
            check: (request) =>
              Effect.zipRight(
                Effect.sync(() => void checked.push(request.stage)),
                Effect.fail(
                  new ContentSafetyError({ code: "CONTENT_SAFETY_BLOCKED", stage: request.stage, message: "blocked" })
                )
              )
          }))
      )
      expect(checked).toStrictEqual([])
    }).pipe(Effect.provide(recordingStack(seen, [answerOf({ echo: "unchecked" })])))
  })

  it.scoped("a 429 or a provider timeout tells the limiter it is overloaded; a Retry-After pauses the model from now", () => {
    const seen = newSeen()
    return Effect.gen(function*() {
      const resolved = yield* resolvedJob("synthetic_echo", { message: "refused" })
      yield* TestClock.adjust(5_000)
      const first = yield* Effect.either(execute(resolved, 1, []))
      expect(first._tag === "Left" && first.left.code).toBe("PROVIDER_RATE_LIMITED")
      const second = yield* Effect.either(execute(resolved, 2, []))
      expect(second._tag === "Left" && second.left.code).toBe("PROVIDER_TIMEOUT")
      const third = yield* Effect.either(execute(resolved, 3, []))
      expect(third._tag === "Left" && third.left.code).toBe("PROVIDER_UNAVAILABLE")
      const fourth = yield* Effect.either(execute(resolved, 4, []))
      expect(fourth._tag === "Left" && fourth.left.code).toBe("VALIDATION_MALFORMED_JSON")
      expect(seen.released).toStrictEqual([{ _tag: "Overloaded" }, { _tag: "Overloaded" }, { _tag: "Failed" }, {
        _tag: "Failed"
      }])
      const providerModel = `${resolved.route.provider}/${resolved.route.model}`
      expect(seen.paused).toStrictEqual([[providerModel, 5_000 + 7_000], [providerModel, 5_000 + 2_000]])
      // Each failed call's row is written as it ends.
      expect((yield* usageRows(resolved.job.id)).map((row) => [row.attemptNo, row.errorCode, row.totalTokens]))
        .toStrictEqual([
          [1, "PROVIDER_RATE_LIMITED", 0],
          [2, "PROVIDER_TIMEOUT", 0],
          [3, "PROVIDER_UNAVAILABLE", 0],
          [4, "VALIDATION_MALFORMED_JSON", 0]
        ])
    }).pipe(Effect.provide(recordingStack(seen, [
      new ProviderError({ code: "PROVIDER_RATE_LIMITED", message: "429", retryAfterMs: 7_000 }),
      new ProviderError({ code: "PROVIDER_TIMEOUT", message: "slow" }),
      new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: "503", retryAfterMs: 2_000 }),
      new ValidationError({ code: "VALIDATION_MALFORMED_JSON", message: "not JSON", problems: ["not JSON"] })
    ])))
  })

  it.scoped("no answer within the definition's timeout: the call is interrupted, the limiter told of overload, the job's TIMEOUT", () => {
    const seen = newSeen()
    return Effect.gen(function*() {
      const resolved = yield* resolvedJob("synthetic_echo", { message: "silence" })
      const run = yield* Effect.fork(Effect.either(execute(resolved, 1, [])))
      yield* TestClock.adjust(29_999)
      expect(seen.released).toStrictEqual([])
      yield* TestClock.adjust(1)
      const ended = yield* Fiber.join(run)
      expect(ended).toMatchObject({
        _tag: "Left",
        left: { _tag: "JobTimeoutError", code: "TIMEOUT", timeoutMs: 30_000, message: "no answer within 30000 ms" }
      })
      expect(seen.released).toStrictEqual([{ _tag: "Overloaded" }])
      expect((yield* usageRows(resolved.job.id)).map((row) => [row.errorCode, row.latencyMs])).toStrictEqual([[
        "TIMEOUT",
        30_000
      ]])
    }).pipe(Effect.provide(recordingStack(seen, ["hang"])))
  })

  it.scoped("an interrupted call frees its slot as a plain failure and writes a CANCELLED row", () => {
    const seen = newSeen()
    return Effect.gen(function*() {
      const resolved = yield* resolvedJob("synthetic_echo", { message: "stopped" })
      const run = yield* Effect.fork(execute(resolved, 1, []))
      yield* TestClock.adjust(1_000)
      yield* Fiber.interrupt(run)
      expect(seen.released).toStrictEqual([{ _tag: "Failed" }])
      expect(seen.paused).toStrictEqual([])
      expect((yield* usageRows(resolved.job.id)).map((row) => row.errorCode)).toStrictEqual(["CANCELLED"])
    }).pipe(Effect.provide(recordingStack(seen, ["hang"])))
  })

  it.scoped("an answer that does not validate fails the attempt with its problems, and the call's row (an answer) is written now", () => {
    const seen = newSeen()
    return Effect.gen(function*() {
      const resolved = yield* resolvedJob("synthetic_echo", { message: "exact" })
      const failed = yield* Effect.either(execute(resolved, 1, []))
      expect(failed).toMatchObject({ _tag: "Left", left: { _tag: "ValidationError" } })
      expect(seen.released).toStrictEqual([{ _tag: "Succeeded", totalTokens: 18 }])
      expect((yield* usageRows(resolved.job.id)).map((row) => [row.attemptNo, row.errorCode, row.totalTokens]))
        .toStrictEqual([
          [1, null, 18]
        ])
    }).pipe(Effect.provide(recordingStack(seen, [answerOf({ echo: "inexact" })])))
  })
})
