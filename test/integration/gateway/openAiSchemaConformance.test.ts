import { NodeHttpClient } from "@effect/platform-node"
import { expect, layer } from "@effect/vitest"
import addFormats from "ajv-formats"
import { Ajv2020 } from "ajv/dist/2020.js"
import { Duration, Effect, Either, Redacted, Schema } from "effect"
import { readFileSync } from "node:fs"
import { makeRoutedOpenAiGateway } from "../../../src/layers/gateway/OpenAiCompatibleGateway.js"
import type { GenerateRequest } from "../../../src/services/AiGateway.js"
import { CANARY_KEY } from "../../support/canary.js"
import { defaultCompletionContent, FakeOpenAiServer } from "../../support/fakeOpenAiServer.js"

/**
 * What the engine sends and accepts, held to OpenAI's published chat-completions description
 * (`test/fixtures/openai-chat-completions.json`: an extract of the official OpenAPI document,
 * MIT-licensed, with `nullable` written as OAS 3.1 type lists) by Ajv, not by Schemas of ours.
 */

const specification = Schema.decodeUnknownSync(Schema.parseJson(Schema.Object))(
  readFileSync(new URL("../../fixtures/openai-chat-completions.json", import.meta.url), "utf8")
)
const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false })
addFormats(ajv)
ajv.addSchema(specification, "openai")

const responseFormatOf = Schema.decodeUnknownSync(
  Schema.Struct({ response_format: Schema.optional(Schema.Struct({ type: Schema.String })) })
)
const officialRequest = ajv.compile({ $ref: "openai#/components/schemas/CreateChatCompletionRequest" })
const officialResponse = ajv.compile({ $ref: "openai#/components/schemas/CreateChatCompletionResponse" })

const server = FakeOpenAiServer.layer({ apiKey: CANARY_KEY })

const credential = {
  mode: "platform_key" as const,
  credentialId: null,
  provider: "openai",
  apiKey: Redacted.make(CANARY_KEY)
}

const request = (overrides: Partial<GenerateRequest> = {}): GenerateRequest => ({
  job: { id: "job-spec", type: "flashcard_generation", attemptNo: 1 },
  messages: [{ role: "system", content: "Answer in json." }, {
    role: "user",
    content: "Photosynthesis, in two cards."
  }],
  provider: "openai",
  model: "gpt-4o-mini",
  credential,
  temperature: 0.7,
  maxTokens: 800,
  jsonMode: true,
  ...overrides
})

const gatewayFor = (baseUrl: string) =>
  makeRoutedOpenAiGateway({
    endpoints: new Map([
      ["openai", { baseUrl, requestTimeout: Duration.millis(5_000), structuredOutputs: true }],
      ["deepseek", { baseUrl, requestTimeout: Duration.millis(5_000) }]
    ]),
    maxResponseBytes: 1024 * 1024
  })

const choice = (message: Record<string, unknown>, finishReason = "stop") => ({
  index: 0,
  message: { role: "assistant", ...message },
  finish_reason: finishReason,
  logprobs: null
})

const answer = (choices: ReadonlyArray<unknown>, extra: Record<string, unknown> = {}) => ({
  id: "chatcmpl-spec",
  object: "chat.completion",
  created: 1_700_000_000,
  model: "gpt-4o-mini-2024-07-18",
  choices,
  ...extra
})

const usage = {
  prompt_tokens: 30,
  completion_tokens: 12,
  total_tokens: 42,
  prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
  completion_tokens_details: {
    reasoning_tokens: 0,
    audio_tokens: 0,
    accepted_prediction_tokens: 0,
    rejected_prediction_tokens: 0
  }
}

/** Answers valid per the official description, and what the engine makes of each. */
const answers: ReadonlyArray<readonly [string, unknown, string]> = [
  [
    "complete, with usage details and a fingerprint",
    answer([choice({ content: defaultCompletionContent, refusal: null })], {
      usage,
      system_fingerprint: "fp_1",
      service_tier: "default"
    }),
    "ok"
  ],
  ["without usage", answer([choice({ content: defaultCompletionContent, refusal: null })]), "ok (estimated)"],
  [
    "a refusal",
    answer([choice({ content: null, refusal: "I can't help with that." })], { usage }),
    "CONTENT_SAFETY_REFUSED"
  ],
  [
    "stopped by the content filter",
    answer([choice({ content: null, refusal: null }, "content_filter")], { usage }),
    "CONTENT_SAFETY_BLOCKED"
  ],
  [
    "cut off at max_tokens",
    answer([choice({ content: "{\"flash", refusal: null }, "length")], { usage }),
    "VALIDATION_MALFORMED_JSON"
  ],
  [
    "annotations and an empty tool list",
    answer([choice({ content: defaultCompletionContent, refusal: null, annotations: [], tool_calls: [] })], { usage }),
    "ok"
  ]
]

layer(server, { excludeTestServices: true, timeout: "30 seconds" })("OpenAI's chat-completions description", (it) => {
  it.effect("every request the engine sends validates against CreateChatCompletionRequest", () =>
    Effect.gen(function*() {
      const fake = yield* FakeOpenAiServer
      const gateway = yield* gatewayFor(fake.baseUrl)
      yield* fake.setScenario({ _tag: "Success" })
      const schema = {
        type: "object",
        properties: { flashcards: { type: "array", items: { type: "object" } } },
        required: ["flashcards"]
      }
      yield* gateway.generate(request())
      yield* gateway.generate(request({ outputSchema: { name: "flashcard_generation", schema } }))
      yield* gateway.generate(
        request({
          provider: "deepseek",
          model: "deepseek-chat",
          outputSchema: { name: "flashcard_generation", schema }
        })
      )
      yield* gateway.generate(request({ jsonMode: false, temperature: undefined, maxTokens: undefined }))
      const bodies = (yield* fake.requests).map((recorded) => recorded.body)
      expect(bodies).toHaveLength(4)
      for (const body of bodies) {
        expect(officialRequest(body) ? "valid" : ajv.errorsText(officialRequest.errors)).toBe("valid")
      }
      expect(bodies.map((body) => responseFormatOf(body).response_format?.type)).toStrictEqual([
        "json_object",
        "json_schema",
        "json_object",
        undefined
      ])
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.effect("answers the official description allows are taken as it allows them", () =>
    Effect.gen(function*() {
      const fake = yield* FakeOpenAiServer
      const gateway = yield* gatewayFor(fake.baseUrl)
      for (const [label, body, expected] of answers) {
        // The sample itself is held to the description first.
        expect([label, officialResponse(body) ? "valid" : ajv.errorsText(officialResponse.errors)]).toStrictEqual([
          label,
          "valid"
        ])
        yield* fake.setScenario({ _tag: "Status", status: 200, body: JSON.stringify(body) })
        const outcome = yield* Effect.either(gateway.generate(request()))
        const seen = Either.match(outcome, {
          onLeft: (error) => error.code,
          onRight: (result) => (result.usageEstimated === true ? "ok (estimated)" : "ok")
        })
        expect([label, seen]).toStrictEqual([label, expected])
      }
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))
})
