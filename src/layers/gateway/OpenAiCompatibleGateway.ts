import { HttpClient, type HttpClientError, HttpClientRequest } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { Clock, Config, Duration, Effect, Either, Layer, ParseResult, Redacted, Schema } from "effect"
import { ContentSafetyError, CredentialError, InternalError, ProviderError, ValidationError } from "../../domain/ExecutionError.js"
import { scrubSecrets } from "../../domain/SecretScrubbing.js"
import { AiGateway, type GatewayError, type GenerateRequest, type GenerateResult } from "../../services/AiGateway.js"
import { ProviderConfig } from "../../config/EngineConfig.js"

// --- The wire format of OpenAI-compatible chat completions (the parts we send and read) ---

export const ChatCompletionRequest = Schema.Struct({
  model: Schema.String,
  messages: Schema.Array(Schema.Struct({ role: Schema.Literal("system", "user", "assistant"), content: Schema.String })),
  temperature: Schema.optional(Schema.Number),
  max_tokens: Schema.optional(Schema.Number),
  response_format: Schema.optional(Schema.Struct({ type: Schema.Literal("json_object", "text") })),
  stream: Schema.Literal(false)
})

export const ChatCompletionResponse = Schema.Struct({
  id: Schema.optional(Schema.String),
  model: Schema.String,
  choices: Schema.NonEmptyArray(
    Schema.Struct({
      index: Schema.optional(Schema.Number),
      message: Schema.Struct({
        role: Schema.optional(Schema.String),
        content: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null })
      }),
      finish_reason: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null })
    })
  ),
  usage: Schema.Struct({
    prompt_tokens: Schema.NonNegativeInt,
    completion_tokens: Schema.NonNegativeInt,
    total_tokens: Schema.NonNegativeInt
  })
})

const ErrorBody = Schema.Struct({
  error: Schema.Struct({
    message: Schema.optional(Schema.NullOr(Schema.String)),
    type: Schema.optional(Schema.NullOr(Schema.String)),
    code: Schema.optional(Schema.NullOr(Schema.Union(Schema.String, Schema.Number)))
  })
})

const decodeResponse = Schema.decodeUnknownEither(Schema.parseJson(ChatCompletionResponse))
const decodeErrorBody = Schema.decodeUnknownEither(Schema.parseJson(ErrorBody))
const parseJson = Schema.decodeUnknownEither(Schema.parseJson())

/** Where a body broke its promise, by path and kind only: values could be model output. */
const problemsOf = (error: ParseResult.ParseError): ReadonlyArray<string> =>
  ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) =>
    `${issue.path.length === 0 ? "<body>" : issue.path.join(".")}: ${issue._tag === "Missing" ? "missing" : "unexpected value"}`
  )

/**
 * The provider error words kept (OpenAI's and DeepSeek's `type` and `code`): anything else the
 * body says, free text included, may quote the key or the input and is dropped.
 */
const knownErrorWords: ReadonlySet<string> = new Set([
  "invalid_request_error",
  "authentication_error",
  "permission_error",
  "permission_denied",
  "not_found_error",
  "rate_limit_error",
  "rate_limit_exceeded",
  "insufficient_quota",
  "insufficient_balance",
  "invalid_api_key",
  "model_not_found",
  "context_length_exceeded",
  "content_filter",
  "content_policy_violation",
  "server_error",
  "api_error",
  "overloaded_error",
  "service_unavailable",
  "timeout"
])

/** A provider's `type` or `code`: a known word or an HTTP-like number, nothing else. */
const knownWord = (value: string | number | null | undefined): string | undefined => {
  if (typeof value === "number") return Number.isInteger(value) && value >= 0 && value < 10_000 ? String(value) : undefined
  if (typeof value !== "string") return undefined
  const word = value.trim().toLowerCase()
  return knownErrorWords.has(word) || /^\d{1,4}$/.test(word) ? word : undefined
}

/**
 * The error with token-like text and the call's own key removed from its message: messages are
 * built without provider text already, this keeps a future one from carrying the key to
 * `internal_error_message` or a log.
 */
const withoutSecrets = (error: GatewayError, key: string): GatewayError => {
  const message = scrubSecrets(error.message, [key])
  if (message === error.message) return error
  switch (error._tag) {
    case "ProviderError":
      return new ProviderError({ ...error, message })
    case "ValidationError":
      return new ValidationError({ ...error, message })
    case "ContentSafetyError":
      return new ContentSafetyError({ ...error, message })
    case "CredentialError":
      return new CredentialError({ ...error, message })
    case "InternalError":
      return new InternalError({ ...error, message })
  }
}

// --- Retry-After ---

/** `Retry-After` as milliseconds from `nowMillis`: delta-seconds or an HTTP date (RFC 9110 10.2.3). */
export const parseRetryAfter = (value: string | undefined, nowMillis: number): number | undefined => {
  if (value === undefined) return undefined
  const trimmed = value.trim()
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000)
  const date = Date.parse(trimmed)
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMillis)
}

// --- The gateway ---

export interface OpenAiGatewayOptions {
  /** `AI_BASE_URL`, e.g. https://api.deepseek.com; `/chat/completions` is appended. */
  readonly baseUrl: string
  /** `AI_REQUEST_TIMEOUT_MS`: no complete answer in this time is `PROVIDER_TIMEOUT`. */
  readonly requestTimeoutMs: number
}

const stripCodeFence = (text: string) => {
  const match = /^\s*```(?:json)?\s*\n([\s\S]*?)\n?```\s*$/i.exec(text)
  return match?.[1] ?? text
}

const isContentRefusal = (message: string | null | undefined) =>
  typeof message === "string" && /content|safety|moderation|risk/i.test(message)

export const makeOpenAiCompatibleGateway = (options: OpenAiGatewayOptions) =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    const url = `${options.baseUrl.replace(/\/+$/, "")}/chat/completions`
    const encodeBody = HttpClientRequest.schemaBodyJson(ChatCompletionRequest)

    const transportError = (error: HttpClientError.HttpClientError) =>
      new ProviderError({
        code: "PROVIDER_UNAVAILABLE",
        // `reason` and the method/URL only; the error's request carries the Authorization header.
        message: `provider request failed (${error._tag} ${error.reason}) ${error.request.method} ${url}`
      })

    const failureFor = (
      status: number,
      body: string,
      retryAfter: string | undefined,
      now: number
    ): GatewayError => {
      const parsed = Either.getOrUndefined(decodeErrorBody(body))?.error
      const detail = [knownWord(parsed?.type), knownWord(parsed?.code)].filter((s) => s !== undefined).join("/")
      const described = `provider answered HTTP ${status}${detail ? ` (${detail})` : ""}`
      const retryAfterMs = parseRetryAfter(retryAfter, now)
      if (status === 429) {
        return new ProviderError({ code: "PROVIDER_RATE_LIMITED", message: described, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) })
      }
      if (status === 401 || status === 403) return new CredentialError({ code: "CREDENTIAL_INVALID", message: described })
      // DeepSeek: 402 Insufficient Balance. The key works but cannot pay: retrying will not help.
      if (status === 402) return new CredentialError({ code: "CREDENTIAL_INVALID", message: `${described}: insufficient balance` })
      if (status === 408) return new ProviderError({ code: "PROVIDER_TIMEOUT", message: described })
      if (status >= 500) {
        return new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: described, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) })
      }
      if ((status === 400 || status === 422) && (isContentRefusal(parsed?.message) || isContentRefusal(parsed?.type) || isContentRefusal(typeof parsed?.code === "string" ? parsed.code : undefined))) {
        return new ContentSafetyError({ code: "CONTENT_SAFETY_BLOCKED", stage: "provider", message: `${described}: refused for content` })
      }
      return new InternalError({ code: "INTERNAL_ERROR", message: `${described}: the provider refused the request` })
    }

    const interpret = (
      request: GenerateRequest,
      body: string,
      latencyMs: number
    ): Either.Either<GenerateResult, GatewayError> => {
      const decoded = decodeResponse(body)
      if (Either.isLeft(decoded)) {
        return Either.left(
          new ValidationError({
            code: "VALIDATION_PROVIDER_RESPONSE",
            message: "provider answered 200 with a body that is not a chat completion",
            problems: problemsOf(decoded.left)
          })
        )
      }
      const response = decoded.right
      const choice = response.choices[0]
      const finishReason = choice.finish_reason ?? "unknown"
      if (finishReason === "content_filter") {
        return Either.left(
          new ContentSafetyError({ code: "CONTENT_SAFETY_BLOCKED", stage: "provider", message: "provider stopped the answer (finish_reason content_filter)" })
        )
      }
      const text = choice.message.content
      if (text === null) {
        return Either.left(
          new ValidationError({
            code: "VALIDATION_PROVIDER_RESPONSE",
            message: `provider answered without message content (finish_reason ${finishReason})`,
            problems: ["choices.0.message.content: missing"]
          })
        )
      }
      const usage = {
        promptTokens: response.usage.prompt_tokens,
        completionTokens: response.usage.completion_tokens,
        totalTokens: response.usage.total_tokens
      }
      const base = { text, usage, provider: request.provider, model: response.model, latencyMs, finishReason }
      if (!request.jsonMode) return Either.right({ ...base, json: null })
      const json = parseJson(stripCodeFence(text))
      if (Either.isLeft(json)) {
        const truncated = finishReason === "length"
        return Either.left(
          new ValidationError({
            code: "VALIDATION_MALFORMED_JSON",
            message: `message content (${text.length} chars, finish_reason ${finishReason}) is not valid JSON`,
            problems: [
              truncated
                ? "The answer was cut off before the JSON ended: answer more briefly."
                : text.trim().length === 0
                ? "The answer was empty: reply with one JSON object."
                : "The answer was not valid JSON: reply with one JSON object and no other text."
            ]
          })
        )
      }
      return Either.right({ ...base, json: json.right })
    }

    const generate = (request: GenerateRequest): Effect.Effect<GenerateResult, GatewayError> =>
      Effect.gen(function* () {
        const started = yield* Clock.currentTimeMillis
        const httpRequest = yield* HttpClientRequest.post(url).pipe(
          HttpClientRequest.bearerToken(request.credential.apiKey),
          HttpClientRequest.acceptJson,
          encodeBody({
            model: request.model,
            messages: request.messages,
            temperature: request.temperature,
            max_tokens: request.maxTokens,
            response_format: request.jsonMode ? { type: "json_object" } : undefined,
            stream: false
          }),
          Effect.mapError((error) =>
            new InternalError({ code: "INTERNAL_ERROR", message: `chat completion request could not be encoded (${error.reason._tag})` })
          )
        )
        const answer = yield* client.execute(httpRequest).pipe(
          Effect.flatMap((response) =>
            Effect.map(response.text, (body) => ({ status: response.status, retryAfter: response.headers["retry-after"], body }))
          ),
          Effect.mapError(transportError),
          Effect.timeoutFail({
            duration: Duration.millis(options.requestTimeoutMs),
            onTimeout: () =>
              new ProviderError({ code: "PROVIDER_TIMEOUT", message: `provider did not answer within ${options.requestTimeoutMs} ms` })
          })
        )
        const finished = yield* Clock.currentTimeMillis
        const latencyMs = finished - started
        if (answer.status < 200 || answer.status >= 300) {
          return yield* failureFor(answer.status, answer.body, answer.retryAfter, finished)
        }
        return yield* interpret(request, answer.body, latencyMs)
      }).pipe(
        Effect.mapError((error) => withoutSecrets(error, Redacted.value(request.credential.apiKey))),
        Effect.tap((result) =>
          Effect.logDebug("provider call succeeded").pipe(
            Effect.annotateLogs({
              latencyMs: result.latencyMs,
              totalTokens: result.usage.totalTokens,
              finishReason: result.finishReason
            })
          )
        ),
        Effect.tapError((error) => Effect.logWarning("provider call failed").pipe(Effect.annotateLogs({ code: error.code }))),
        Effect.annotateLogs({
          jobId: request.job.id,
          jobType: request.job.type,
          attemptNo: request.job.attemptNo,
          provider: request.provider,
          model: request.model,
          credentialMode: request.credential.mode
        })
        // The call's span is `provider.chat`, around any gateway (src/services/AiGatewayTelemetry.ts).
      )

    return AiGateway.of({ generate })
  })

/** The gateway for explicit options, on the `HttpClient` of the context. */
export const OpenAiCompatibleGatewayLayer = (options: OpenAiGatewayOptions) =>
  Layer.effect(AiGateway, makeOpenAiCompatibleGateway(options))

/** `AI_REQUEST_TIMEOUT_MS` (default 60 s): one HTTP call's budget, inside the job's own timeout. */
export const requestTimeoutConfig = Config.integer("AI_REQUEST_TIMEOUT_MS").pipe(
  Config.withDefault(60_000),
  Config.validate({ message: "AI_REQUEST_TIMEOUT_MS must be a positive whole number of milliseconds", validation: (n) => n > 0 })
)

/** From configuration (`AI_BASE_URL`, `AI_REQUEST_TIMEOUT_MS`), on Node's HTTP client (undici). */
export const OpenAiCompatibleGatewayLive = Layer.effect(
  AiGateway,
  Effect.gen(function* () {
    const provider = yield* ProviderConfig
    const requestTimeoutMs = yield* requestTimeoutConfig
    return yield* makeOpenAiCompatibleGateway({ baseUrl: provider.baseUrl, requestTimeoutMs })
  })
).pipe(Layer.provide(NodeHttpClient.layerUndici))

