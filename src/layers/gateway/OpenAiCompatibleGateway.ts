import { HttpClient, type HttpClientError, HttpClientRequest } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { Chunk, Clock, Duration, Effect, Either, Layer, Option, ParseResult, Redacted, Schema, Stream } from "effect"
import { defaultMaxResponseBytes, ProviderSettings } from "../../config/ProviderSettings.js"
import {
  ContentSafetyError,
  CredentialError,
  InternalError,
  ProviderError,
  ValidationError
} from "../../domain/ExecutionError.js"
import { scrubSecrets } from "../../domain/SecretScrubbing.js"
import { estimatedUsage } from "../../domain/TokenEstimate.js"
import { AiGateway, type GatewayError, type GenerateRequest, type GenerateResult } from "../../services/AiGateway.js"
import { pauseUntilFromHeaders } from "../rateLimitHeaders.js"

// --- The wire format of OpenAI-compatible chat completions (the parts we send and read) ---

const ResponseFormat = Schema.Union(
  Schema.Struct({ type: Schema.Literal("json_object", "text") }),
  Schema.Struct({
    type: Schema.Literal("json_schema"),
    json_schema: Schema.Struct({ name: Schema.String, schema: Schema.Object, strict: Schema.Boolean })
  })
)

export const ChatCompletionRequest = Schema.Struct({
  model: Schema.String,
  messages: Schema.Array(
    Schema.Struct({ role: Schema.Literal("system", "user", "assistant"), content: Schema.String })
  ),
  temperature: Schema.optional(Schema.Number),
  max_tokens: Schema.optional(Schema.Number),
  response_format: Schema.optional(ResponseFormat),
  stream: Schema.Literal(false)
})

/**
 * What the official description requires of an answer, and no more: `usage` and its counts are
 * optional (an answer without them is kept, its tokens estimated), `content` may be null beside
 * a `refusal`.
 */
export const ChatCompletionResponse = Schema.Struct({
  id: Schema.optional(Schema.String),
  model: Schema.String,
  choices: Schema.NonEmptyArray(
    Schema.Struct({
      index: Schema.optional(Schema.Number),
      message: Schema.Struct({
        role: Schema.optional(Schema.String),
        content: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }),
        refusal: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null })
      }),
      finish_reason: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null })
    })
  ),
  usage: Schema.optional(
    Schema.NullOr(
      Schema.Struct({
        prompt_tokens: Schema.optional(Schema.NonNegativeInt),
        completion_tokens: Schema.optional(Schema.NonNegativeInt),
        total_tokens: Schema.optional(Schema.NonNegativeInt)
      })
    )
  )
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
    `${issue.path.length === 0 ? "<body>" : issue.path.join(".")}: ${
      issue._tag === "Missing" ? "missing" : "unexpected value"
    }`
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
  if (typeof value === "number") {
    return Number.isInteger(value) && value >= 0 && value < 10_000
      ? String(value)
      : undefined
  }
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
export const parseRetryAfter = (value: string | undefined, nowMillis: number): number | undefined =>
  retryAfterFromHeaders({ "retry-after": value }, nowMillis)

/**
 * How long a refusal asks to wait, from every header that says (`Retry-After`, `x-ratelimit-reset-*`,
 * ...), as the provider said it: the engine bounds what it does with it (`AI_MAX_RETRY_AFTER_MS`).
 */
const retryAfterFromHeaders = (headers: Readonly<Record<string, string | undefined>>, nowMillis: number) => {
  const until = pauseUntilFromHeaders(headers, nowMillis)
  return until === undefined ? undefined : until - nowMillis
}

// --- Deadlines that let an answer already received win ---

/**
 * Resolves after the event loop's next I/O phases. After a pause of the whole process (SIGSTOP,
 * a long GC) every timer is due at once, and Node runs timers before it reads sockets: without
 * these turns a deadline would fire over an answer that is already waiting to be read.
 */
const afterPendingIo = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})
export const settleIo = Effect.zipRight(afterPendingIo, afterPendingIo)

const deadline = <E>(after: Duration.Duration, error: () => E): Effect.Effect<never, E> =>
  Effect.sleep(after).pipe(Effect.zipRight(settleIo), Effect.zipRight(Effect.fail(error())))

// --- The gateway ---

/** One OpenAI-compatible endpoint. */
export interface ProviderEndpointOptions {
  /** e.g. https://api.deepseek.com; `/chat/completions` is appended. */
  readonly baseUrl: string
  /** No complete answer in this time is `PROVIDER_TIMEOUT`. */
  readonly requestTimeout: Duration.Duration
  readonly headers?: Readonly<Record<string, string>>
  /** Sends the job type's output schema as `response_format: json_schema` (otherwise `json_object`). */
  readonly structuredOutputs?: boolean
}

/** One endpoint answering every provider name (tests and a single provider). */
export interface OpenAiGatewayOptions extends ProviderEndpointOptions {
  /** An answer longer than this fails with `PROVIDER_RESPONSE_TOO_LARGE` (default 4 MiB). */
  readonly maxResponseBytes?: number
}

export interface RoutedGatewayOptions {
  /** By provider name: a request goes to its own provider's endpoint, never another's. */
  readonly endpoints: ReadonlyMap<string, ProviderEndpointOptions>
  readonly maxResponseBytes: number
}

const stripCodeFence = (text: string) => {
  const match = /^\s*```(?:json)?\s*\n([\s\S]*?)\n?```\s*$/i.exec(text)
  return match?.[1] ?? text
}

const isContentRefusal = (message: string | null | undefined) =>
  typeof message === "string" && /content|safety|moderation|risk/i.test(message)

/** Connection errors that mean the request never left this machine. */
const notSentCodes = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT"
])

const errorCodeOf = (cause: unknown, depth = 0): string | undefined => {
  if (depth > 4 || typeof cause !== "object" || cause === null) return undefined
  const code = Reflect.get(cause, "code")
  if (typeof code === "string" && notSentCodes.has(code)) return code
  return errorCodeOf(Reflect.get(cause, "cause"), depth + 1)
}

/** The answer as received: status, headers and the body (at most the bound), or the bound passed. */
interface Answer {
  readonly status: number
  readonly headers: Readonly<Record<string, string | undefined>>
  readonly body: string
}

const withUrl = (endpoint: ProviderEndpointOptions) => ({
  ...endpoint,
  url: `${endpoint.baseUrl.replace(/\/+$/, "")}/chat/completions`
})

const makeGateway = (
  endpointFor: (provider: string) => ReturnType<typeof withUrl> | undefined,
  maxResponseBytes: number
) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const encodeBody = HttpClientRequest.schemaBodyJson(ChatCompletionRequest)

    const transportError = (error: HttpClientError.HttpClientError, url: string) => {
      const notSent = error._tag === "RequestError" ? errorCodeOf(error.cause) : undefined
      return new ProviderError({
        code: "PROVIDER_UNAVAILABLE",
        // `reason` and the method/URL only; the error's request carries the Authorization header.
        message: `provider request failed (${error._tag} ${error.reason}${
          notSent === undefined ? "" : ` ${notSent}`
        }) POST ${url}`,
        ...(notSent === undefined ? {} : { sent: false })
      })
    }

    const failureFor = (
      status: number,
      body: string,
      headers: Readonly<Record<string, string | undefined>>,
      now: number
    ): GatewayError => {
      const parsed = Either.getOrUndefined(decodeErrorBody(body))?.error
      const detail = [knownWord(parsed?.type), knownWord(parsed?.code)].filter((s) => s !== undefined).join("/")
      const described = `provider answered HTTP ${status}${detail ? ` (${detail})` : ""}`
      const retryAfterMs = retryAfterFromHeaders(headers, now)
      const wait = retryAfterMs !== undefined ? { retryAfterMs } : {}
      if (status === 429) return new ProviderError({ code: "PROVIDER_RATE_LIMITED", message: described, ...wait })
      if (status === 401 || status === 403) {
        return new CredentialError({ code: "CREDENTIAL_INVALID", message: described })
      }
      // DeepSeek: 402 Insufficient Balance. The key works but cannot pay: retrying will not help.
      if (status === 402) {
        return new CredentialError({ code: "CREDENTIAL_INVALID", message: `${described}: insufficient balance` })
      }
      if (status === 408) {
        return new ProviderError({ code: "PROVIDER_TIMEOUT", message: described })
      }
      if (status >= 500 || status < 400) {
        return new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: described, ...wait })
      }
      const refusedForContent = [
        parsed?.message,
        parsed?.type,
        typeof parsed?.code === "string" ? parsed.code : undefined
      ].some(isContentRefusal)
      if ((status === 400 || status === 422) && refusedForContent) {
        return new ContentSafetyError({
          code: "CONTENT_SAFETY_BLOCKED",
          stage: "provider",
          message: `${described}: refused for content`
        })
      }
      // An unknown model, a parameter this provider lacks, a context too long: the same request
      // would be refused again here; another target may take it.
      return new ProviderError({
        code: "PROVIDER_REQUEST_REJECTED",
        message: `${described}: the provider refused the request`
      })
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
      const reported = response.usage
      const billed = reported?.prompt_tokens !== undefined && reported.completion_tokens !== undefined
        ? {
          usage: {
            promptTokens: reported.prompt_tokens,
            completionTokens: reported.completion_tokens,
            totalTokens: reported.total_tokens ?? reported.prompt_tokens + reported.completion_tokens
          }
        }
        : {
          usage: estimatedUsage(request.messages, choice.message.content ?? choice.message.refusal ?? ""),
          usageEstimated: true
        }
      if (finishReason === "content_filter") {
        return Either.left(
          new ContentSafetyError({
            code: "CONTENT_SAFETY_BLOCKED",
            stage: "provider",
            message: "provider stopped the answer (finish_reason content_filter)"
          })
        )
      }
      const text = choice.message.content
      if (text === null && choice.message.refusal !== null) {
        // The refusal's words stay out of every message: they may quote the input.
        return Either.left(
          new ContentSafetyError({
            code: "CONTENT_SAFETY_REFUSED",
            stage: "provider",
            message: `the model refused to answer (refusal of ${choice.message.refusal.length} chars)`
          })
        )
      }
      if (text === null) {
        return Either.left(
          new ValidationError({
            code: "VALIDATION_PROVIDER_RESPONSE",
            message: `provider answered without message content (finish_reason ${finishReason})`,
            problems: ["choices.0.message.content: missing"]
          })
        )
      }
      const base = { text, ...billed, provider: request.provider, model: response.model, latencyMs, finishReason }
      if (!request.jsonMode) {
        return Either.right({ ...base, json: null })
      }
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

    /** The body, read as it streams in; past the bound the read stops and the connection is dropped. */
    const readBounded = (stream: Stream.Stream<Uint8Array, HttpClientError.ResponseError>) =>
      Stream.runFoldWhileEffect(
        stream,
        { bytes: 0, chunks: Chunk.empty<Uint8Array>() },
        (read) => read.bytes <= maxResponseBytes,
        (read, chunk) =>
          Effect.succeed({ bytes: read.bytes + chunk.byteLength, chunks: Chunk.append(read.chunks, chunk) })
      ).pipe(
        Effect.map((read) =>
          read.bytes > maxResponseBytes
            ? Option.none()
            : Option.some(Buffer.concat(Chunk.toReadonlyArray(read.chunks)).toString("utf8"))
        )
      )

    const responseFormatOf = (request: GenerateRequest, structuredOutputs: boolean) => {
      if (!request.jsonMode) return undefined
      if (structuredOutputs && request.outputSchema !== undefined) {
        return {
          type: "json_schema" as const,
          json_schema: { name: request.outputSchema.name, schema: request.outputSchema.schema, strict: false }
        }
      }
      return { type: "json_object" as const }
    }

    const generate = (request: GenerateRequest): Effect.Effect<GenerateResult, GatewayError> =>
      Effect.gen(function*() {
        const endpoint = endpointFor(request.provider)
        if (endpoint === undefined) {
          return yield* new InternalError({
            code: "INTERNAL_ERROR",
            message: `provider "${request.provider}" is not configured`
          })
        }
        const started = yield* Clock.currentTimeMillis
        const httpRequest = yield* HttpClientRequest.post(endpoint.url).pipe(
          HttpClientRequest.setHeaders(endpoint.headers ?? {}),
          HttpClientRequest.bearerToken(request.credential.apiKey),
          HttpClientRequest.acceptJson,
          encodeBody({
            model: request.model,
            messages: request.messages,
            temperature: request.temperature,
            max_tokens: request.maxTokens,
            response_format: responseFormatOf(request, endpoint.structuredOutputs ?? false),
            stream: false
          }),
          Effect.mapError((error) =>
            new InternalError({
              code: "INTERNAL_ERROR",
              message: `chat completion request could not be encoded (${error.reason._tag})`
            })
          )
        )
        const answer = yield* client.execute(httpRequest).pipe(
          Effect.flatMap((response) =>
            Effect.map(readBounded(response.stream), (body): Answer | undefined =>
              Option.match(body, {
                onNone: () => undefined,
                onSome: (text) => ({ status: response.status, headers: response.headers, body: text })
              }))
          ),
          Effect.mapError((error) => transportError(error, endpoint.url)),
          Effect.raceFirst(
            deadline(endpoint.requestTimeout, () =>
              new ProviderError({
                code: "PROVIDER_TIMEOUT",
                message: `provider did not answer within ${Duration.toMillis(endpoint.requestTimeout)} ms`
              }))
          )
        )
        if (answer === undefined) {
          return yield* new ProviderError({
            code: "PROVIDER_RESPONSE_TOO_LARGE",
            message: `provider answer exceeded ${maxResponseBytes} bytes; the read was stopped`
          })
        }
        const finished = yield* Clock.currentTimeMillis
        if (answer.status < 200 || answer.status >= 300) {
          return yield* failureFor(answer.status, answer.body, answer.headers, finished)
        }
        return yield* interpret(request, answer.body, finished - started)
      }).pipe(
        Effect.mapError((error) => withoutSecrets(error, Redacted.value(request.credential.apiKey))),
        Effect.tap((result) =>
          Effect.logDebug("provider call succeeded").pipe(
            Effect.annotateLogs({
              latencyMs: result.latencyMs,
              totalTokens: result.usage.totalTokens,
              usageEstimated: result.usageEstimated === true,
              finishReason: result.finishReason
            })
          )
        ),
        Effect.tapError((error) =>
          Effect.logWarning("provider call failed").pipe(Effect.annotateLogs({ code: error.code }))
        ),
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

    return AiGateway.of({ generate, settle: settleIo })
  })

/** A gateway whose one endpoint answers every provider name (a single provider, and tests). */
export const makeOpenAiCompatibleGateway = (options: OpenAiGatewayOptions) => {
  const endpoint = withUrl(options)
  return makeGateway(() => endpoint, options.maxResponseBytes ?? defaultMaxResponseBytes)
}

/** A gateway that sends each request to its own provider's endpoint, and refuses a provider it does not know. */
export const makeRoutedOpenAiGateway = (options: RoutedGatewayOptions) => {
  const endpoints = new Map([...options.endpoints].map(([name, endpoint]) => [name, withUrl(endpoint)]))
  return makeGateway((provider) => endpoints.get(provider), options.maxResponseBytes)
}

/** The gateway for explicit options, on the `HttpClient` of the context. */
export const OpenAiCompatibleGatewayLayer = (options: OpenAiGatewayOptions) =>
  Layer.effect(AiGateway, makeOpenAiCompatibleGateway(options))

/** From configuration (`AI_PROVIDERS`, or `AI_BASE_URL` and `AI_REQUEST_TIMEOUT_MS`), on Node's HTTP client (undici). */
export const OpenAiCompatibleGatewayLive = Layer.effect(
  AiGateway,
  Effect.gen(function*() {
    const settings = yield* ProviderSettings
    return yield* makeRoutedOpenAiGateway({
      endpoints: settings.providers,
      maxResponseBytes: settings.maxResponseBytes
    })
  })
).pipe(Layer.provide(NodeHttpClient.layerUndici))
