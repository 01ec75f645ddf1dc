import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Exit, Fiber, Layer, Option, Redacted, TestClock } from "effect"
import {
  ContentSafetyError,
  CredentialError,
  ProviderError,
  ValidationError
} from "../../../src/domain/ExecutionError.js"
import { execute } from "../../../src/pipeline/execute.js"
import { prepare } from "../../../src/pipeline/prepare.js"
import { resolve } from "../../../src/pipeline/resolve.js"
import {
  AiGateway,
  type GatewayError,
  type GenerateRequest,
  type GenerateResult
} from "../../../src/services/AiGateway.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { CredentialVault } from "../../../src/services/CredentialVault.js"
import { payloadFor } from "../../../src/services/JobQueue.js"
import { ProviderCapacity } from "../../../src/services/ProviderCapacity.js"
import { ProviderCircuitBreaker } from "../../../src/services/ProviderCircuitBreaker.js"
import { UsageLog } from "../../../src/services/UsageLog.js"
import { memoryEngineStack } from "../../support/engineStack.js"

const PRIMARY_KEY = "sk-primary-platform-key-000000000001"
const BACKUP_KEY = "sk-backup-platform-key-0000000000002"

type Answer = GenerateResult | GatewayError | "hang"

/** Two providers, each with its own key, and a route `primary → backup` for every job type. */
const settings = (route: Record<string, unknown> = {}) =>
  ConfigProvider.fromMap(
    new Map([
      [
        "AI_PROVIDERS",
        JSON.stringify({
          primary: { baseUrl: "https://primary.example", apiKeyEnv: "PRIMARY_KEY" },
          backup: { baseUrl: "https://backup.example", apiKeyEnv: "BACKUP_KEY" }
        })
      ],
      ["PRIMARY_KEY", PRIMARY_KEY],
      ["BACKUP_KEY", BACKUP_KEY],
      ["AI_PROVIDER", "primary"],
      ["AI_BREAKER_FAILURES", "2"],
      [
        "AI_MODEL_ROUTES",
        JSON.stringify({ "*:platform_key": { fallbacks: [{ provider: "backup", model: "backup-model" }], ...route } })
      ]
    ])
  )

/** A provider per name answering its calls in turn; every request it got, with the key it carried. */
const providers = (answers: Record<string, Array<Answer>>, seen: Array<GenerateRequest>) =>
  Layer.succeed(AiGateway, {
    generate: (request) =>
      Effect.suspend(() => {
        seen.push(request)
        const next = answers[request.provider]?.shift()
        if (next === undefined || next === "hang") return Effect.never
        return "_tag" in next
          ? Effect.fail(next)
          : Effect.succeed({ ...next, provider: request.provider, model: request.model })
      })
  })

const stack = (
  answers: Record<string, Array<Answer>>,
  seen: Array<GenerateRequest>,
  route: Record<string, unknown> = {}
) =>
  memoryEngineStack({ gateway: providers(answers, seen) }).pipe(Layer.provide(Layer.setConfigProvider(settings(route))))

const echo = (message: string): GenerateResult => ({
  text: JSON.stringify({ echo: message }),
  json: { echo: message },
  usage: { promptTokens: 10, completionTokens: 5, totalTokens: 15 },
  provider: "",
  model: "",
  latencyMs: 20,
  finishReason: "stop"
})

const resolvedEcho = (message: string, userId = "user-f") =>
  Effect.gen(function*() {
    const { job } = yield* Effect.flatMap(AiJobService, (service) =>
      service.createJob({ userId, jobType: "synthetic_echo", targetType: "test", targetId: "t", input: { message } }))
    const payload = payloadFor({ jobId: job.id, jobType: job.jobType, createdAt: job.createdAt })
    return yield* resolve(Option.getOrThrow(yield* prepare(payload, "worker-1", Duration.millis(60_000))))
  })

const usageRows = (jobId: string) =>
  Effect.map(
    Effect.flatMap(UsageLog, (usage) => usage.listByJobId(jobId)),
    (rows) => rows.map((row) => [row.attemptNo, row.provider, row.errorCode])
  )

const unavailable = () => new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: "HTTP 500" })
const keyOf = (request: GenerateRequest) => Redacted.value(request.credential.apiKey)

describe("EXECUTE over a route with fallbacks (memory layers)", () => {
  it.scoped("a provider-side failure moves on within the attempt; each provider gets only its own key", () => {
    const seen: Array<GenerateRequest> = []
    return Effect.gen(function*() {
      const resolved = yield* resolvedEcho("failover")
      expect(resolved.targets.map((target) => [target.provider, target.model])).toStrictEqual([[
        "primary",
        "deepseek-chat"
      ], [
        "backup",
        "backup-model"
      ]])
      const executed = yield* execute(resolved, 1, [])
      expect(executed.output).toStrictEqual({ echo: "failover" })
      expect(seen.map((request) => [request.provider, request.model, request.job.attemptNo, keyOf(request)]))
        .toStrictEqual([
          ["primary", "deepseek-chat", 1, PRIMARY_KEY],
          ["backup", "backup-model", 2, BACKUP_KEY]
        ])
      // The primary's call is written as it ends; the backup's travels to PROJECT, named for the backup.
      expect(yield* usageRows(resolved.job.id)).toStrictEqual([[1, "primary", "PROVIDER_UNAVAILABLE"]])
      expect([executed.usage.attemptNo, executed.usage.provider, executed.usage.model]).toStrictEqual([
        2,
        "backup",
        "backup-model"
      ])
    }).pipe(Effect.provide(stack({ primary: [unavailable()], backup: [echo("failover")] }, seen)))
  })

  it.scoped("what belongs to the job does not move on: an answer that is not JSON, a refusal", () => {
    const seen: Array<GenerateRequest> = []
    return Effect.gen(function*() {
      const malformed = yield* Effect.flip(execute(yield* resolvedEcho("not json"), 1, []))
      expect(malformed.code).toBe("VALIDATION_MALFORMED_JSON")
      const refused = yield* Effect.flip(execute(yield* resolvedEcho("refused"), 1, []))
      expect(refused.code).toBe("CONTENT_SAFETY_REFUSED")
      expect(seen.map((request) => request.provider)).toStrictEqual(["primary", "primary"])
    }).pipe(Effect.provide(stack({
      primary: [
        new ValidationError({ code: "VALIDATION_MALFORMED_JSON", message: "not JSON", problems: ["not JSON"] }),
        // A refusal is the model's answer about this job: no other provider is asked.
        new ContentSafetyError({ code: "CONTENT_SAFETY_REFUSED", stage: "provider", message: "refused" })
      ],
      backup: [echo("never")]
    }, seen)))
  })

  it.scoped("a 429 moves on only when its wait is longer than the route allows; a rejected request and a rejected platform key move on", () => {
    const seen: Array<GenerateRequest> = []
    return Effect.gen(function*() {
      const short = yield* Effect.flip(execute(yield* resolvedEcho("short wait"), 1, []))
      expect([short.code, short._tag === "ProviderError" && short.retryAfterMs]).toStrictEqual([
        "PROVIDER_RATE_LIMITED",
        1_000
      ])
      expect(seen.map((request) => request.provider)).toStrictEqual(["primary"])
      yield* TestClock.adjust(2_000)
      const longWait = yield* execute(yield* resolvedEcho("long wait"), 1, [])
      expect(longWait.output).toStrictEqual({ echo: "long wait" })
      // The 429 paused the primary for its 30 s: the next job goes straight to the backup.
      expect((yield* execute(yield* resolvedEcho("paused"), 1, [])).usage.provider).toBe("backup")
      yield* TestClock.adjust(30_000)
      for (const message of ["rejected", "bad key"]) {
        const executed = yield* execute(yield* resolvedEcho(message), 1, [])
        expect(executed.output).toStrictEqual({ echo: message })
      }
      expect(seen.map((request) => request.provider)).toStrictEqual([
        "primary",
        "primary",
        "backup",
        "backup",
        "primary",
        "backup",
        "primary",
        "backup"
      ])
    }).pipe(Effect.provide(stack(
      {
        primary: [
          new ProviderError({ code: "PROVIDER_RATE_LIMITED", message: "429", retryAfterMs: 1_000 }),
          new ProviderError({ code: "PROVIDER_RATE_LIMITED", message: "429", retryAfterMs: 30_000 }),
          new ProviderError({ code: "PROVIDER_REQUEST_REJECTED", message: "HTTP 404 (model_not_found)" }),
          new CredentialError({ code: "CREDENTIAL_INVALID", message: "HTTP 401" })
        ],
        backup: [echo("long wait"), echo("paused"), echo("rejected"), echo("bad key")]
      },
      seen,
      { maxWaitMs: 5_000 }
    )))
  })

  it.scoped("every target failing: the attempt fails with a retryable error when any target's failure was one", () => {
    const seen: Array<GenerateRequest> = []
    return Effect.gen(function*() {
      const failed = yield* Effect.flip(execute(yield* resolvedEcho("both down"), 1, []))
      expect(failed.code).toBe("PROVIDER_UNAVAILABLE")
      expect(yield* usageRows((yield* resolvedEcho("unused")).job.id)).toStrictEqual([])
    }).pipe(Effect.provide(stack({
      primary: [unavailable()],
      backup: [new ProviderError({ code: "PROVIDER_REQUEST_REJECTED", message: "HTTP 400" })]
    }, seen)))
  })

  it.scoped("an open breaker skips its target without a call; after the cooldown one call probes, and a success closes it", () => {
    const seen: Array<GenerateRequest> = []
    return Effect.gen(function*() {
      for (const message of ["a", "b"]) yield* execute(yield* resolvedEcho(message), 1, [])
      expect((yield* Effect.flatMap(ProviderCircuitBreaker, (breaker) => breaker.view("primary/deepseek-chat"))).state)
        .toBe("open")
      yield* execute(yield* resolvedEcho("c"), 1, [])
      expect(seen.map((request) => request.provider)).toStrictEqual([
        "primary",
        "backup",
        "primary",
        "backup",
        "backup"
      ])
      yield* TestClock.adjust(10_000)
      yield* execute(yield* resolvedEcho("d"), 1, [])
      expect(seen.at(-1)?.provider).toBe("primary")
      expect((yield* Effect.flatMap(ProviderCircuitBreaker, (breaker) => breaker.view("primary/deepseek-chat"))).state)
        .toBe("closed")
    }).pipe(Effect.provide(stack({
      primary: [unavailable(), unavailable(), echo("d")],
      backup: [echo("a"), echo("b"), echo("c")]
    }, seen)))
  })

  it.scoped("a paused target overflows to the next at once; on the last target a pause past the budget fails without waiting", () => {
    const seen: Array<GenerateRequest> = []
    return Effect.gen(function*() {
      const capacity = yield* ProviderCapacity
      const now = yield* TestClock.currentTimeMillis
      yield* capacity.pause("primary/deepseek-chat", now + 20_000)
      const executed = yield* execute(yield* resolvedEcho("overflow"), 1, [])
      expect(executed.usage.provider).toBe("backup")
      yield* capacity.pause("backup/backup-model", now + 50_000)
      // Both paused: the primary overflows, the backup's pause outlasts the job's 30 s budget.
      const fiber = yield* Effect.fork(Effect.flip(execute(yield* resolvedEcho("budget"), 1, [])))
      const failed = yield* Fiber.join(fiber)
      expect(failed.code).toBe("PROVIDER_RATE_LIMITED")
      expect(yield* TestClock.currentTimeMillis).toBe(now)
      expect(seen.map((request) => request.provider)).toStrictEqual(["backup"])
    }).pipe(Effect.provide(stack({ primary: [], backup: [echo("overflow")] }, seen, { maxWaitMs: 1_000 })))
  })

  it.scoped("a Retry-After of years pauses the model for AI_MAX_RETRY_AFTER_MS (60 s) and the retry waits no longer", () => {
    const seen: Array<GenerateRequest> = []
    return Effect.gen(function*() {
      const now = yield* TestClock.currentTimeMillis
      const failed = yield* Effect.flip(execute(yield* resolvedEcho("years"), 1, []))
      expect([failed.code, failed._tag === "ProviderError" && failed.retryAfterMs]).toStrictEqual([
        "PROVIDER_RATE_LIMITED",
        60_000
      ])
      const state = yield* Effect.flatMap(ProviderCapacity, (capacity) => capacity.state("primary/deepseek-chat"))
      expect(state.pausedUntil).toBe(now + 60_000)
    }).pipe(Effect.provide(stack(
      {
        primary: [new ProviderError({ code: "PROVIDER_RATE_LIMITED", message: "429", retryAfterMs: 99_999_999_000 })]
      },
      seen,
      { fallbacks: [] }
    )))
  })

  it.scoped("a user's own key goes only to its own provider, and its 429 pauses that key alone", () => {
    const seen: Array<GenerateRequest> = []
    return Effect.gen(function*() {
      const vault = yield* CredentialVault
      const stored = yield* vault.store({
        userId: "user-own",
        apiKey: Redacted.make("sk-users-own-deepseek-key-0000003"),
        provider: "primary"
      })
      const { job } = yield* Effect.flatMap(AiJobService, (service) =>
        service.createJob({
          userId: "user-own",
          jobType: "synthetic_echo",
          targetType: "test",
          targetId: "t",
          input: { message: "own key" },
          overrides: { credentialMode: "user_deepseek_key", credentialId: stored.id }
        }))
      const payload = payloadFor({ jobId: job.id, jobType: job.jobType, createdAt: job.createdAt })
      const resolved = yield* resolve(Option.getOrThrow(yield* prepare(payload, "worker-1", Duration.millis(60_000))))
      expect(resolved.targets.map((target) => target.provider)).toStrictEqual(["primary"])
      const now = yield* TestClock.currentTimeMillis
      const failed = yield* Effect.exit(execute(resolved, 1, []))
      expect(Exit.isFailure(failed)).toBe(true)
      expect(seen.map((request) => [request.provider, keyOf(request)])).toStrictEqual([[
        "primary",
        "sk-users-own-deepseek-key-0000003"
      ]])
      const capacity = yield* ProviderCapacity
      expect((yield* capacity.state("primary/deepseek-chat", stored.id)).pausedUntil).toBe(now + 7_000)
      expect((yield* capacity.state("primary/deepseek-chat")).pausedUntil).toBe(0)
      // A platform-key job is not held by the user's pause.
      const platform = yield* execute(yield* resolvedEcho("platform"), 1, [])
      expect(platform.usage.provider).toBe("primary")
    }).pipe(Effect.provide(stack(
      {
        primary: [
          new ProviderError({ code: "PROVIDER_RATE_LIMITED", message: "429", retryAfterMs: 7_000 }),
          echo("platform")
        ],
        backup: []
      },
      seen,
      { fallbacks: [] }
    )))
  })
})
