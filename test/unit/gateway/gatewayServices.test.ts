import { expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Option, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { ProviderConfig } from "../../../src/config/EngineConfig.js"
import { builtinPromptTemplates, BuiltinPromptTemplatesLive } from "../../../src/jobs/builtinPrompts.js"
import { parseRetryAfter } from "../../../src/layers/gateway/OpenAiCompatibleGateway.js"
import { MemoryCredentialRepository } from "../../../src/layers/memory/MemoryCredentialRepository.js"
import { MemoryDatabaseLive } from "../../../src/layers/memory/MemoryDatabase.js"
import { AiCostCalculator, costOf } from "../../../src/services/AiCostCalculator.js"
import { ContentSafety } from "../../../src/services/ContentSafety.js"
import { CredentialVault } from "../../../src/services/CredentialVault.js"
import { ModelRouter } from "../../../src/services/ModelRouter.js"
import { PromptTemplates } from "../../../src/services/PromptTemplates.js"
import { CANARY_KEY } from "../../support/canary.js"
import { LogCapture, LogCaptureLayer } from "../../support/logCapture.js"

const withEnv = (env: Record<string, string>) =>
  Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

it.effect("content safety: blocked terms and patterns, on input and output, naming the rule not the content", () =>
  Effect.gen(function*() {
    const safety = yield* ContentSafety
    yield* safety.check({ stage: "input", jobType: "t", content: { text: "a harmless sentence", list: ["fine"] } })
    const term = yield* Effect.flip(
      safety.check({ stage: "input", jobType: "t", content: { deep: ["ok", { x: "Buy FORBIDDEN stuff" }] } })
    )
    expect(term).toMatchObject({ _tag: "ContentSafetyError", code: "CONTENT_SAFETY_BLOCKED", stage: "input" })
    expect(term.message).not.toContain("Buy")
    const fullWidth = yield* Effect.flip(safety.check({ stage: "output", jobType: "t", content: "ＦＯＲＢＩＤＤＥＮ" }))
    expect(fullWidth.stage).toBe("output")
    const pattern = yield* Effect.flip(
      safety.check({ stage: "output", jobType: "t", content: { card: "call 555-123-4567 now" } })
    )
    expect(pattern.message).toContain("pattern #1")
  }).pipe(
    Effect.provide(
      ContentSafety.withRules({ blockedTerms: ["forbidden"], blockedPatterns: ["\\b\\d{3}-\\d{3}-\\d{4}\\b"] })
    )
  ))

it.effect("content safety from the environment; a bad pattern fails at start", () =>
  Effect.gen(function*() {
    const blocked = yield* Effect.flatMap(ContentSafety, (s) =>
      Effect.flip(s.check({ stage: "input", jobType: "t", content: "some BADWORD here" }))).pipe(
        Effect.provide(
          ContentSafety.Default.pipe(
            Layer.provide(
              withEnv({
                CONTENT_SAFETY_BLOCKED_TERMS: "badword, other",
                CONTENT_SAFETY_BLOCKED_PATTERNS: "[\"^secret:\"]"
              })
            )
          )
        )
      )
    expect(blocked.code).toBe("CONTENT_SAFETY_BLOCKED")
    const bad = yield* Effect.flip(
      Effect.provide(
        ContentSafety,
        ContentSafety.Default.pipe(Layer.provide(withEnv({ CONTENT_SAFETY_BLOCKED_PATTERNS: "[\"(unclosed\"]" })))
      )
    )
    expect(String(bad)).toContain("CONTENT_SAFETY_BLOCKED_PATTERNS")
  }))

it.effect("cost: micro-units from the price table, rounded up; AI_PRICE_TABLE overrides; unknown model costs 0", () =>
  Effect.gen(function*() {
    expect(
      costOf({ inputMicrosPerMillionTokens: 280_000, outputMicrosPerMillionTokens: 420_000 }, {
        promptTokens: 1_000_000,
        completionTokens: 1_000_000
      })
    ).toBe(700_000)
    expect(
      costOf({ inputMicrosPerMillionTokens: 280_000, outputMicrosPerMillionTokens: 420_000 }, {
        promptTokens: 1,
        completionTokens: 0
      })
    ).toBe(1)
    const calculator = yield* AiCostCalculator
    expect(
      yield* calculator.costMicros("deepseek-chat", { promptTokens: 1000, completionTokens: 500, totalTokens: 1500 })
    ).toBe(490)
    expect(
      yield* calculator.costMicros("my-model", { promptTokens: 1_000_000, completionTokens: 0, totalTokens: 1_000_000 })
    ).toBe(1_000_000)
    expect(yield* calculator.costMicros("unknown", { promptTokens: 10, completionTokens: 10, totalTokens: 20 })).toBe(0)
    expect(Option.isSome(calculator.priceOf("deepseek-chat"))).toBe(true)
  }).pipe(
    Effect.provide(AiCostCalculator.Default.pipe(
      Layer.provide(
        withEnv({
          AI_PRICE_TABLE: JSON.stringify({
            "my-model": { inputMicrosPerMillionTokens: 1_000_000, outputMicrosPerMillionTokens: 2_000_000 }
          })
        })
      )
    ))
  ))

it.effect("model router: defaults from AI_MODEL, overrides by job type and credential mode", () =>
  Effect.gen(function*() {
    const router = yield* ModelRouter
    expect(yield* router.route({ jobType: "synthetic_echo", credentialMode: "platform_key" })).toEqual({
      provider: "deepseek",
      model: "deepseek-chat",
      temperature: 0.7,
      maxTokens: undefined,
      jsonMode: true
    })
    expect(yield* router.route({ jobType: "flashcard_generation", credentialMode: "platform_key" })).toMatchObject({
      model: "deepseek-chat",
      maxTokens: 4000
    })
    expect(yield* router.route({ jobType: "feynman_evaluation", credentialMode: "user_deepseek_key" })).toMatchObject({
      model: "deepseek-reasoner",
      temperature: 0
    })
    expect(yield* router.route({ jobType: "feynman_evaluation", credentialMode: "platform_key" })).toMatchObject({
      model: "deepseek-chat",
      temperature: 0
    })
  }).pipe(
    Effect.provide(ModelRouter.Default.pipe(
      Layer.provide(ProviderConfig.layer),
      Layer.provide(withEnv({
        AI_MODEL_ROUTES: JSON.stringify({
          flashcard_generation: { maxTokens: 4000 },
          feynman_evaluation: { temperature: 0 },
          "feynman_evaluation:user_deepseek_key": { model: "deepseek-reasoner" }
        })
      }))
    ))
  ))

it.effect("prompt templates: v1 (kept for stored jobs) and v2 for each built-in type, problems appended, unknown version is INTERNAL_ERROR", () =>
  Effect.gen(function*() {
    const prompts = yield* PromptTemplates
    expect(builtinPromptTemplates.map((t) => `${t.jobType}@${t.version}`)).toEqual([
      "synthetic_echo@v1",
      "synthetic_echo@v2",
      "flashcard_generation@v1",
      "flashcard_generation@v2",
      "feynman_evaluation@v1",
      "feynman_evaluation@v2",
      "learning_analysis@v2"
    ])
    expect(prompts.currentVersion("flashcard_generation")).toEqual(Option.some("v2"))
    const first = yield* prompts.render({
      jobType: "flashcard_generation",
      promptVersion: "v1",
      content: { sourceText: "Cells divide.", count: 3 }
    })
    expect(first.messages.map((m) => m.role)).toEqual(["system", "user"])
    expect(first.messages.map((m) => m.content).join("\n")).toContain("Cells divide.")
    expect(first.messages.map((m) => m.content).join("\n").toLowerCase()).toContain("json")
    const retry = yield* prompts.render({
      jobType: "feynman_evaluation",
      promptVersion: "v1",
      content: { concept: "entropy", explanation: "disorder" },
      problems: ["score: Expected an integer"]
    })
    expect(retry.messages.at(-1)?.content).toContain("score: Expected an integer")
    const echo = yield* prompts.render({
      jobType: "synthetic_echo",
      promptVersion: "v1",
      content: { message: "hi there" }
    })
    expect(echo.messages.at(-1)?.content).toBe("hi there")
    expect(
      yield* Effect.flip(prompts.render({ jobType: "synthetic_echo", promptVersion: "v9", content: { message: "x" } }))
    ).toMatchObject({ code: "INTERNAL_ERROR" })
    const misfit = yield* Effect.flip(
      prompts.render({ jobType: "feynman_evaluation", promptVersion: "v1", content: { concept: "SECRET-CONTENT" } })
    )
    expect(misfit.code).toBe("INTERNAL_ERROR")
    expect(misfit.message).not.toContain("SECRET-CONTENT")
  }).pipe(Effect.provide(BuiltinPromptTemplatesLive)))

it("Retry-After: delta seconds and HTTP dates", () => {
  const now = Date.UTC(2025, 0, 1, 12, 0, 0)
  expect(parseRetryAfter("30", now)).toBe(30_000)
  expect(parseRetryAfter("1.5", now)).toBe(1_500)
  expect(parseRetryAfter(new Date(now + 90_000).toUTCString(), now)).toBe(90_000)
  expect(parseRetryAfter(new Date(now - 90_000).toUTCString(), now)).toBe(0)
  expect(parseRetryAfter("soon", now)).toBeUndefined()
  expect(parseRetryAfter(undefined, now)).toBeUndefined()
})

const keyV1 = randomBytes(32).toString("base64")
const keyV2 = randomBytes(32).toString("base64")

it.effect("vault from configuration: key version and previous keys; nothing logged holds the key", () =>
  Effect.gen(function*() {
    const vault = yield* CredentialVault
    const stored = yield* vault.store({ userId: "u1", apiKey: Redacted.make(CANARY_KEY) })
    expect(stored.keyVersion).toBe(2)
    const resolved = yield* vault.resolve({ mode: "user_deepseek_key", credentialId: stored.id, userId: "u1" })
    expect(Redacted.value(resolved.apiKey)).toBe(CANARY_KEY)
    const platform = yield* vault.resolve({ mode: "platform_key", credentialId: null, userId: "u1" })
    yield* Effect.logInfo("resolved", resolved, platform, { request: resolved })
    const failed = yield* Effect.flip(vault.resolve({ mode: "user_deepseek_key", credentialId: "nope", userId: "u1" }))
    yield* Effect.logError("resolve failed", failed)
    const lines = yield* (yield* LogCapture).lines
    expect(lines.some((line) => line.includes("user credential stored"))).toBe(true)
    for (const line of lines) {
      expect(line).not.toContain(CANARY_KEY)
      expect(line).not.toContain(keyV1)
      expect(line).not.toContain(keyV2)
    }
  }).pipe(
    Effect.provide(
      Layer.mergeAll(
        CredentialVault.Default.pipe(
          Layer.provide(MemoryCredentialRepository),
          Layer.provide(MemoryDatabaseLive),
          Layer.provide(ProviderConfig.layer),
          Layer.provide(withEnv({
            AI_API_KEY: "sk-platform-key",
            CREDENTIAL_ENCRYPTION_KEY: keyV2,
            CREDENTIAL_ENCRYPTION_KEY_VERSION: "2",
            CREDENTIAL_ENCRYPTION_PREVIOUS_KEYS: `1:${keyV1}`
          }))
        ),
        LogCaptureLayer
      )
    )
  ))

it.effect("a malformed CREDENTIAL_ENCRYPTION_PREVIOUS_KEYS fails at start without echoing the value", () =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(
      Effect.provide(
        CredentialVault,
        CredentialVault.Default.pipe(
          Layer.provide(MemoryCredentialRepository),
          Layer.provide(MemoryDatabaseLive),
          Layer.provide(ProviderConfig.layer),
          Layer.provide(
            withEnv({ CREDENTIAL_ENCRYPTION_KEY: keyV2, CREDENTIAL_ENCRYPTION_PREVIOUS_KEYS: "1:c2hvcnQ=" })
          )
        )
      )
    )
    expect(String(error)).toContain("CREDENTIAL_ENCRYPTION_PREVIOUS_KEYS")
    expect(String(error)).not.toContain("c2hvcnQ=")
  }))
