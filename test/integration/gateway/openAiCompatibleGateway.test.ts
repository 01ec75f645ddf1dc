import { NodeHttpClient } from "@effect/platform-node"
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Option, Redacted } from "effect"
import { createServer } from "node:http"
import type { ExecutionError } from "../../../src/domain/ExecutionError.js"
import { scrubSecrets } from "../../../src/domain/SecretScrubbing.js"
import {
  makeOpenAiCompatibleGateway,
  makeRoutedOpenAiGateway,
  OpenAiCompatibleGatewayLayer
} from "../../../src/layers/gateway/OpenAiCompatibleGateway.js"
import { MemoryCredentialRepository } from "../../../src/layers/memory/MemoryCredentialRepository.js"
import { MemoryDatabaseLive } from "../../../src/layers/memory/MemoryDatabase.js"
import { AiGateway, type GenerateRequest, type ResolvedCredential } from "../../../src/services/AiGateway.js"
import { CredentialVault, makeKeyring } from "../../../src/services/CredentialVault.js"
import { CANARY_KEY, WRONG_CANARY_KEY } from "../../support/canary.js"
import { defaultCompletionContent, FakeOpenAiServer } from "../../support/fakeOpenAiServer.js"
import { LogCapture, LogCaptureLayer } from "../../support/logCapture.js"

const REQUEST_TIMEOUT_MS = 1_000

const server = FakeOpenAiServer.layer({ apiKey: CANARY_KEY })

const gateway = Layer.unwrapEffect(
  Effect.map(
    FakeOpenAiServer,
    (fake) =>
      OpenAiCompatibleGatewayLayer({ baseUrl: fake.baseUrl, requestTimeout: Duration.millis(REQUEST_TIMEOUT_MS) })
  )
).pipe(Layer.provide(NodeHttpClient.layerUndici))

const vault = CredentialVault.withOptions({
  keyring: makeKeyring(Option.some({ version: 1, key: Redacted.make(Buffer.alloc(32, 7).toString("base64")) })),
  platformKey: Option.some(Redacted.make(CANARY_KEY))
}).pipe(Layer.provide(MemoryCredentialRepository), Layer.provide(MemoryDatabaseLive))

const TestLayer = Layer.mergeAll(gateway, vault, LogCaptureLayer).pipe(Layer.provideMerge(server))

const secretsOf = (value: unknown) => {
  const text = `${String(value)} ${JSON.stringify(value)}`
  return [CANARY_KEY, WRONG_CANARY_KEY].filter((secret) => text.includes(secret))
}

/** A user's key stored in the vault and resolved the way RESOLVE does it. */
const userCredential = Effect.gen(function*() {
  const credentials = yield* CredentialVault
  const stored = yield* credentials.store({ userId: "user-1", apiKey: Redacted.make(CANARY_KEY) })
  return yield* credentials.resolve({ mode: "user_deepseek_key", credentialId: stored.id, userId: "user-1" })
})

const requestWith = (credential: ResolvedCredential, overrides: Partial<GenerateRequest> = {}): GenerateRequest => ({
  job: { id: "job-1", type: "flashcard_generation", attemptNo: 1 },
  messages: [
    { role: "system", content: "Answer in json." },
    { role: "user", content: "SECRET-PROMPT-CONTENT about photosynthesis" }
  ],
  provider: "deepseek",
  model: "deepseek-chat",
  credential,
  temperature: 0.2,
  maxTokens: 512,
  jsonMode: true,
  ...overrides
})

/** Runs one call against the current scenario and returns its typed failure. */
const failureOf = (overrides: Partial<GenerateRequest> = {}) =>
  Effect.gen(function*() {
    const credential = yield* userCredential
    const error: ExecutionError = yield* Effect.flip((yield* AiGateway).generate(requestWith(credential, overrides)))
    expect(secretsOf(error)).toEqual([])
    return error
  })

layer(TestLayer, { excludeTestServices: true, timeout: "30 seconds" })(
  "OpenAI-compatible gateway over real HTTP",
  (it) => {
    it.effect("success: JSON mode, bearer key, parsed JSON and token usage", () =>
      Effect.gen(function*() {
        const fake = yield* FakeOpenAiServer
        yield* fake.setScenario({
          _tag: "Success",
          content: JSON.stringify({ flashcards: [{ front: "Q", back: "A" }] })
        })
        const credential = yield* userCredential
        const result = yield* (yield* AiGateway).generate(requestWith(credential))
        expect(result.json).toEqual({ flashcards: [{ front: "Q", back: "A" }] })
        expect(result.usage).toEqual({ promptTokens: 12, completionTokens: 7, totalTokens: 19 })
        expect(result.model).toBe("deepseek-chat")
        expect(result.provider).toBe("deepseek")
        expect(result.finishReason).toBe("stop")
        expect(result.latencyMs).toBeGreaterThanOrEqual(0)
        const sent = (yield* fake.requests).at(-1)
        expect(sent?.path).toBe("/chat/completions")
        expect(sent?.authorization).toBe(`Bearer ${CANARY_KEY}`)
        expect(sent?.body).toMatchObject({
          model: "deepseek-chat",
          response_format: { type: "json_object" },
          stream: false,
          temperature: 0.2,
          max_tokens: 512,
          messages: [{ role: "system" }, { role: "user", content: "SECRET-PROMPT-CONTENT about photosynthesis" }]
        })
      }))

    it.effect("a JSON answer wrapped in a code fence is still read", () =>
      Effect.gen(function*() {
        const fake = yield* FakeOpenAiServer
        yield* fake.setScenario({ _tag: "Success", content: "```json\n{\"score\": 90}\n```" })
        const credential = yield* userCredential
        expect((yield* (yield* AiGateway).generate(requestWith(credential))).json).toEqual({ score: 90 })
      }))

    it.effect("429 → PROVIDER_RATE_LIMITED with Retry-After in seconds", () =>
      Effect.gen(function*() {
        yield* (yield* FakeOpenAiServer).setScenario({ _tag: "RateLimited", retryAfter: "7" })
        const error = yield* failureOf()
        expect(error).toMatchObject({ _tag: "ProviderError", code: "PROVIDER_RATE_LIMITED", retryAfterMs: 7_000 })
      }))

    it.effect("429 → PROVIDER_RATE_LIMITED with Retry-After as an HTTP date", () =>
      Effect.gen(function*() {
        const at = new Date(Date.now() + 120_000).toUTCString()
        yield* (yield* FakeOpenAiServer).setScenario({ _tag: "RateLimited", retryAfter: at })
        const error = yield* failureOf()
        expect(error).toMatchObject({ _tag: "ProviderError", code: "PROVIDER_RATE_LIMITED" })
        const retryAfterMs = error._tag === "ProviderError" ? error.retryAfterMs ?? -1 : -1
        expect(retryAfterMs).toBeGreaterThan(110_000)
        expect(retryAfterMs).toBeLessThanOrEqual(120_000)
      }))

    it.effect("429 without Retry-After has no retryAfterMs", () =>
      Effect.gen(function*() {
        yield* (yield* FakeOpenAiServer).setScenario({ _tag: "RateLimited" })
        const error = yield* failureOf()
        expect(error).toMatchObject({ code: "PROVIDER_RATE_LIMITED" })
        expect(error._tag === "ProviderError" && error.retryAfterMs).toBe(undefined)
      }))

    it.effect("500 and 503 → PROVIDER_UNAVAILABLE", () =>
      Effect.gen(function*() {
        const fake = yield* FakeOpenAiServer
        yield* fake.setScenario({ _tag: "ServerError" })
        expect(yield* failureOf()).toMatchObject({ _tag: "ProviderError", code: "PROVIDER_UNAVAILABLE" })
        yield* fake.setScenario({ _tag: "ServerError", status: 503 })
        expect(yield* failureOf()).toMatchObject({ _tag: "ProviderError", code: "PROVIDER_UNAVAILABLE" })
      }))

    it.effect("a refused connection → PROVIDER_UNAVAILABLE", () =>
      Effect.gen(function*() {
        const closedPort = yield* Effect.async<number>((resume) => {
          const probe = createServer()
          probe.listen(0, "127.0.0.1", () => {
            const address = probe.address()
            const port = typeof address === "object" && address !== null ? address.port : 1
            probe.close(() => resume(Effect.succeed(port)))
          })
        })
        const unreachable = yield* makeOpenAiCompatibleGateway({
          baseUrl: `http://127.0.0.1:${closedPort}`,
          requestTimeout: Duration.millis(2_000)
        }).pipe(
          Effect.provide(NodeHttpClient.layerUndici)
        )
        const credential = yield* userCredential
        const error = yield* Effect.flip(unreachable.generate(requestWith(credential)))
        expect(error).toMatchObject({ _tag: "ProviderError", code: "PROVIDER_UNAVAILABLE" })
        expect(secretsOf(error)).toEqual([])
      }))

    it.effect("no answer within AI_REQUEST_TIMEOUT_MS → PROVIDER_TIMEOUT, and the request is aborted", () =>
      Effect.gen(function*() {
        const fake = yield* FakeOpenAiServer
        yield* fake.setScenario({ _tag: "Slow", delayMs: 10_000 })
        const error = yield* failureOf()
        expect(error).toMatchObject({ _tag: "ProviderError", code: "PROVIDER_TIMEOUT" })
        const aborted = yield* fake.aborted.pipe(Effect.timeout("5 seconds"))
        expect(aborted.aborted).toBe(true)
        expect(aborted.answered).toBe(false)
      }))

    it.effect("interrupting a slow call aborts the HTTP request: the server sees it", () =>
      Effect.gen(function*() {
        const fake = yield* FakeOpenAiServer
        yield* fake.setScenario({ _tag: "Slow", delayMs: 10_000 })
        const credential = yield* userCredential
        const gatewayService = yield* AiGateway
        const fiber = yield* Effect.fork(
          gatewayService.generate(
            requestWith(credential, { job: { id: "job-interrupted", type: "synthetic_echo", attemptNo: 1 } })
          )
        )
        const received = yield* fake.received.pipe(Effect.timeout("5 seconds"))
        expect(received.aborted).toBe(false)
        yield* Fiber.interrupt(fiber)
        const aborted = yield* fake.aborted.pipe(Effect.timeout("5 seconds"))
        expect(aborted).toBe(received)
        expect(aborted.answered).toBe(false)
      }))

    it.effect("headers at once but the body too late (keep-alive blank lines) → PROVIDER_TIMEOUT, request aborted", () =>
      Effect.gen(function*() {
        const fake = yield* FakeOpenAiServer
        yield* fake.setScenario({ _tag: "SlowBody", delayMs: 10_000 })
        expect(yield* failureOf()).toMatchObject({ _tag: "ProviderError", code: "PROVIDER_TIMEOUT" })
        const aborted = yield* fake.aborted.pipe(Effect.timeout("5 seconds"))
        expect(aborted.answered).toBe(false)
      }))

    it.effect("a body that trickles in within the timeout is read (leading blank lines are JSON whitespace)", () =>
      Effect.gen(function*() {
        yield* (yield* FakeOpenAiServer).setScenario({ _tag: "SlowBody", delayMs: 200 })
        const credential = yield* userCredential
        expect((yield* (yield* AiGateway).generate(requestWith(credential))).json).toEqual({ ok: true, answer: 42 })
      }))

    it.effect("401 (wrong key) and 403 → CREDENTIAL_INVALID, without the key in the error", () =>
      Effect.gen(function*() {
        const fake = yield* FakeOpenAiServer
        yield* fake.setScenario({ _tag: "Success" })
        const wrong: ResolvedCredential = {
          mode: "platform_key",
          credentialId: null,
          provider: "deepseek",
          apiKey: Redacted.make(WRONG_CANARY_KEY)
        }
        const error = yield* Effect.flip((yield* AiGateway).generate(requestWith(wrong)))
        expect(error).toMatchObject({ _tag: "CredentialError", code: "CREDENTIAL_INVALID" })
        expect(secretsOf(error)).toEqual([])
        expect((yield* fake.requests).at(-1)?.authorization).toBe(`Bearer ${WRONG_CANARY_KEY}`)
        yield* fake.setScenario({
          _tag: "Status",
          status: 403,
          body: JSON.stringify({ error: { message: "forbidden", type: "permission_error" } })
        })
        expect(yield* failureOf()).toMatchObject({ _tag: "CredentialError", code: "CREDENTIAL_INVALID" })
      }))

    it.effect("finish_reason content_filter and a 400 content refusal → CONTENT_SAFETY_BLOCKED", () =>
      Effect.gen(function*() {
        const fake = yield* FakeOpenAiServer
        yield* fake.setScenario({ _tag: "ContentFilter" })
        expect(yield* failureOf()).toMatchObject({
          _tag: "ContentSafetyError",
          code: "CONTENT_SAFETY_BLOCKED",
          stage: "provider"
        })
        yield* fake.setScenario({ _tag: "ContentRisk400" })
        expect(yield* failureOf()).toMatchObject({
          _tag: "ContentSafetyError",
          code: "CONTENT_SAFETY_BLOCKED",
          stage: "provider"
        })
      }))

    it.effect("another 400 (or 404, 422) is PROVIDER_REQUEST_REJECTED: the provider refused the request, typed, readable, never retried here", () =>
      Effect.gen(function*() {
        const fake = yield* FakeOpenAiServer
        yield* fake.setScenario({
          _tag: "Status",
          status: 400,
          body: JSON.stringify({
            error: {
              message: "max_tokens is too large",
              type: "invalid_request_error",
              code: "context_length_exceeded"
            }
          })
        })
        const rejected = yield* failureOf()
        expect(rejected).toMatchObject({ _tag: "ProviderError", code: "PROVIDER_REQUEST_REJECTED" })
        // The provider's error type and code stay readable through the secret scrub of the stored message.
        expect(scrubSecrets(rejected.message)).toContain("(invalid_request_error/context_length_exceeded)")
        expect(rejected.message).not.toContain("max_tokens is too large")
        yield* fake.setScenario({
          _tag: "Status",
          status: 404,
          body: JSON.stringify({
            error: { message: "no such model", type: "invalid_request_error", code: "model_not_found" }
          })
        })
        expect(yield* failureOf()).toMatchObject({ _tag: "ProviderError", code: "PROVIDER_REQUEST_REJECTED" })
      }))

    it.effect("an answer without usage (optional in OpenAI's description) is kept, its tokens estimated and said to be", () =>
      Effect.gen(function*() {
        const fake = yield* FakeOpenAiServer
        yield* fake.setScenario({
          _tag: "Status",
          status: 200,
          body: JSON.stringify({
            id: "chatcmpl-no-usage",
            object: "chat.completion",
            created: 1_700_000_000,
            model: "deepseek-chat",
            choices: [{
              index: 0,
              message: { role: "assistant", content: defaultCompletionContent, refusal: null },
              finish_reason: "stop",
              logprobs: null
            }]
          })
        })
        const credential = yield* userCredential
        const result = yield* (yield* AiGateway).generate(requestWith(credential))
        expect(result.json).toEqual({ ok: true, answer: 42 })
        expect(result.usageEstimated).toBe(true)
        expect(result.usage.promptTokens).toBeGreaterThan(0)
        expect(result.usage.completionTokens).toBe(Math.ceil(defaultCompletionContent.length / 4))
        expect(result.usage.totalTokens).toBe(result.usage.promptTokens + result.usage.completionTokens)
      }))

    it.effect("a refusal (content null, refusal text) is CONTENT_SAFETY_REFUSED, final, and its text is kept out", () =>
      Effect.gen(function*() {
        yield* (yield* FakeOpenAiServer).setScenario({
          _tag: "Status",
          status: 200,
          body: JSON.stringify({
            id: "chatcmpl-refusal",
            object: "chat.completion",
            created: 1_700_000_000,
            model: "gpt-4o",
            choices: [{
              index: 0,
              message: { role: "assistant", content: null, refusal: "I cannot help with SECRET-REFUSAL-TEXT." },
              finish_reason: "stop",
              logprobs: null
            }],
            usage: { prompt_tokens: 20, completion_tokens: 9, total_tokens: 29 }
          })
        })
        const refused = yield* failureOf()
        expect(refused).toMatchObject({ _tag: "ContentSafetyError", code: "CONTENT_SAFETY_REFUSED", stage: "provider" })
        expect(JSON.stringify(refused) + refused.message).not.toContain("SECRET-REFUSAL-TEXT")
      }))

    it.effect("an answer larger than AI_MAX_RESPONSE_BYTES is cut off as it streams in: PROVIDER_RESPONSE_TOO_LARGE", () =>
      Effect.gen(function*() {
        const fake = yield* FakeOpenAiServer
        const small = yield* makeOpenAiCompatibleGateway({
          baseUrl: fake.baseUrl,
          requestTimeout: Duration.millis(10_000),
          maxResponseBytes: 64 * 1024
        })
        yield* fake.setScenario({ _tag: "Success", content: JSON.stringify({ padding: "x".repeat(1024 * 1024) }) })
        const credential = yield* userCredential
        const error = yield* Effect.flip(small.generate(requestWith(credential)))
        expect(error).toMatchObject({ _tag: "ProviderError", code: "PROVIDER_RESPONSE_TOO_LARGE" })
        // Below the bound the same gateway reads the answer.
        yield* fake.setScenario({ _tag: "Success" })
        expect((yield* small.generate(requestWith(credential))).json).toEqual({ ok: true, answer: 42 })
      }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

    it.effect("an answer already in the socket when every timer falls due at once (a frozen process) is read, not timed out", () =>
      Effect.gen(function*() {
        yield* (yield* FakeOpenAiServer).setScenario({ _tag: "AnswerThenFreeze", freezeMs: REQUEST_TIMEOUT_MS + 500 })
        const credential = yield* userCredential
        const result = yield* (yield* AiGateway).generate(requestWith(credential))
        expect(result.usage).toEqual({ promptTokens: 12, completionTokens: 7, totalTokens: 19 })
      }))

    it.effect("each request goes to its own provider's endpoint with that provider's headers; a provider not configured is refused", () =>
      Effect.gen(function*() {
        const fake = yield* FakeOpenAiServer
        yield* fake.setScenario({ _tag: "Success" })
        const routed = yield* makeRoutedOpenAiGateway({
          endpoints: new Map([
            ["primary", {
              baseUrl: fake.baseUrl,
              requestTimeout: Duration.millis(5_000),
              headers: { "x-provider-tag": "primary" }
            }],
            ["structured", { baseUrl: fake.baseUrl, requestTimeout: Duration.millis(5_000), structuredOutputs: true }]
          ]),
          maxResponseBytes: 1024 * 1024
        })
        const credential = yield* userCredential
        const outputSchema = {
          name: "flashcard_generation",
          schema: { type: "object", properties: { ok: { type: "boolean" } } }
        }
        yield* routed.generate(requestWith(credential, { provider: "primary", outputSchema }))
        const first = (yield* fake.requests).at(-1)
        expect(first?.headers["x-provider-tag"]).toBe("primary")
        expect(first?.body).toMatchObject({ response_format: { type: "json_object" } })
        yield* routed.generate(requestWith(credential, { provider: "structured", outputSchema }))
        expect((yield* fake.requests).at(-1)?.body).toMatchObject({
          response_format: {
            type: "json_schema",
            json_schema: { name: "flashcard_generation", schema: outputSchema.schema, strict: false }
          }
        })
        const sent = (yield* fake.requests).length
        const unknown = yield* Effect.flip(routed.generate(requestWith(credential, { provider: "elsewhere" })))
        expect(unknown).toMatchObject({ _tag: "InternalError", code: "INTERNAL_ERROR" })
        expect((yield* fake.requests).length).toBe(sent)
      }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

    it.effect("a 200 body that is not a chat completion → VALIDATION_PROVIDER_RESPONSE", () =>
      Effect.gen(function*() {
        const fake = yield* FakeOpenAiServer
        yield* fake.setScenario({ _tag: "MalformedBody" })
        const error = yield* failureOf()
        expect(error).toMatchObject({ _tag: "ValidationError", code: "VALIDATION_PROVIDER_RESPONSE" })
        expect(error._tag === "ValidationError" && error.problems.length).toBeGreaterThan(0)
        yield* fake.setScenario({ _tag: "MalformedBody", body: "<html>gateway</html>" })
        expect(yield* failureOf()).toMatchObject({ _tag: "ValidationError", code: "VALIDATION_PROVIDER_RESPONSE" })
      }))

    it.effect("message content that is not JSON → VALIDATION_MALFORMED_JSON with a problem for the next prompt", () =>
      Effect.gen(function*() {
        yield* (yield* FakeOpenAiServer).setScenario({ _tag: "MalformedContent" })
        const error = yield* failureOf()
        expect(error).toMatchObject({ _tag: "ValidationError", code: "VALIDATION_MALFORMED_JSON" })
        expect(error._tag === "ValidationError" ? error.problems : []).toEqual([
          "The answer was not valid JSON: reply with one JSON object and no other text."
        ])
        // The model's text is not copied into the error (it reaches internal_error_message).
        expect(JSON.stringify(error)).not.toContain("Here are your flashcards")
      }))

    it.effect("nothing logged contains a key, a prompt or an answer", () =>
      Effect.gen(function*() {
        const lines = yield* (yield* LogCapture).lines
        expect(lines.length).toBeGreaterThan(5)
        expect(lines.some((line) => line.includes("provider call failed") && line.includes("PROVIDER_RATE_LIMITED")))
          .toBe(true)
        for (const line of lines) {
          expect(line).not.toContain(CANARY_KEY)
          expect(line).not.toContain(WRONG_CANARY_KEY)
          expect(line).not.toContain("SECRET-PROMPT-CONTENT")
          expect(line).not.toContain("flashcards")
        }
      }))
  }
)
