import {
  Config,
  ConfigError,
  Context,
  Duration,
  Effect,
  Either,
  Layer,
  Option,
  ParseResult,
  Redacted,
  Schema
} from "effect"
import { ProviderConfig } from "./EngineConfig.js"
import { duplicateTopLevelKeys } from "./jsonObjectKeys.js"

/**
 * The AI providers the engine may call, each with its own base URL and its own platform key.
 * `AI_PROVIDERS` lists them; without it, `AI_PROVIDER` / `AI_BASE_URL` / `AI_API_KEY` /
 * `AI_REQUEST_TIMEOUT_MS` describe a set of one. A key is presented only to its own provider.
 */

/** A provider's name: what routes, limits (`provider/model`) and usage rows call it. */
export const ProviderName = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9._-]{1,64}$/))

const HttpUrl = Schema.String.pipe(
  Schema.filter((value) => {
    try {
      const url = new URL(value)
      return (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== "" && url.username === "" &&
          url.password === ""
        ? undefined
        : "must be an http(s) URL without credentials"
    } catch {
      return "must be an http(s) URL"
    }
  })
)

const EnvName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, { message: () => "must be an environment variable name" })
)

const HeaderName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/),
  Schema.filter((name) =>
    ["authorization", "content-type", "content-length", "host"].includes(name.toLowerCase())
      ? "is set by the engine"
      : undefined
  )
)

const ProviderEntry = Schema.Struct({
  baseUrl: HttpUrl,
  /** The variable the provider's platform key is read from (never the key itself). */
  apiKeyEnv: EnvName,
  requestTimeoutMs: Schema.optional(Schema.Int.pipe(Schema.between(1, 600_000))),
  /** Extra request headers (OpenRouter's `HTTP-Referer`, an organisation header, ...). */
  headers: Schema.optional(
    Schema.Record({ key: HeaderName, value: Schema.String.pipe(Schema.pattern(/^[\t\x20-\x7e]*$/)) })
  ),
  /** Whether the provider takes `response_format: json_schema` (OpenAI does; DeepSeek takes only `json_object`). */
  structuredOutputs: Schema.optional(Schema.Boolean)
})

const ProvidersJson = Schema.parseJson(Schema.Record({ key: ProviderName, value: ProviderEntry }))
const decodeProviders = Schema.decodeUnknownEither(ProvidersJson, { onExcessProperty: "error" })

/** One provider as the gateway and the credential vault need it. */
export interface ProviderEndpoint {
  readonly name: string
  readonly baseUrl: string
  /** The platform key for this provider; none only for the legacy single provider without `AI_API_KEY`. */
  readonly apiKey: Option.Option<Redacted.Redacted<string>>
  /** Where the key comes from, for messages. */
  readonly apiKeyVariable: string
  /** No complete answer in this time is `PROVIDER_TIMEOUT` (`requestTimeoutMs` in `AI_PROVIDERS`, else `AI_REQUEST_TIMEOUT_MS`). */
  readonly requestTimeout: Duration.Duration
  readonly headers: Readonly<Record<string, string>>
  readonly structuredOutputs: boolean
}

export interface ProviderSettingsShape {
  /** In the order they were listed. */
  readonly providers: ReadonlyMap<string, ProviderEndpoint>
  /** `AI_PROVIDER` (default `deepseek`): the provider of the default route. */
  readonly defaultProvider: string
  /**
   * `AI_MAX_RETRY_AFTER_MS` (default 60 s): the longest wait a provider's `Retry-After` (or
   * rate-limit reset header) can impose; a longer one is cut to this.
   */
  readonly maxRetryAfter: Duration.Duration
  /** `AI_MAX_RESPONSE_BYTES` (default 4 MiB): an answer longer than this is cut off and fails. */
  readonly maxResponseBytes: number
  /**
   * `AI_FALLBACK_MAX_WAIT_MS` (default 2 s): how long a route with fallbacks lets a target keep a
   * call waiting (its limiter, a pause, a 429's `Retry-After`) before the next target is tried.
   */
  readonly fallbackMaxWait: Duration.Duration
}

export const defaultRequestTimeout = Duration.seconds(60)
export const defaultMaxRetryAfter = Duration.seconds(60)
export const defaultMaxResponseBytes = 4 * 1024 * 1024
export const defaultFallbackMaxWait = Duration.seconds(2)

const invalid = (variable: string, message: string) => Effect.fail(ConfigError.InvalidData([variable], message))

const boundedMillis = (name: string, fallback: Duration.Duration, max: number) =>
  Config.integer(name).pipe(
    Config.withDefault(Duration.toMillis(fallback)),
    Config.validate({
      message: `${name} must be a whole number of milliseconds from 1 to ${max}`,
      validation: (n) => n >= 1 && n <= max
    }),
    Config.map(Duration.millis)
  )

const legacyConfig = Config.all({
  provider: Config.string("AI_PROVIDER").pipe(Config.withDefault("deepseek")),
  baseUrlSet: Config.option(Config.string("AI_BASE_URL")).pipe(Config.map(Option.isSome)),
  requestTimeout: boundedMillis("AI_REQUEST_TIMEOUT_MS", defaultRequestTimeout, 600_000)
})

const limitsConfig = Config.all({
  maxRetryAfter: boundedMillis("AI_MAX_RETRY_AFTER_MS", defaultMaxRetryAfter, 24 * 60 * 60 * 1000),
  maxResponseBytes: Config.integer("AI_MAX_RESPONSE_BYTES").pipe(
    Config.withDefault(defaultMaxResponseBytes),
    Config.validate({
      message: "AI_MAX_RESPONSE_BYTES must be a whole number of bytes from 1024 to 268435456",
      validation: (n) => n >= 1024 && n <= 256 * 1024 * 1024
    })
  ),
  fallbackMaxWait: boundedMillis("AI_FALLBACK_MAX_WAIT_MS", defaultFallbackMaxWait, 600_000)
})

const isHttpUrl = Schema.is(HttpUrl)

/** Where a setting broke its shape, by path only: a header value may be a secret. */
const wrongPaths = (error: ParseResult.ParseError) =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .map((issue) =>
      (issue.path.length === 0 ? "<root>" : issue.path.join(".")) +
      (issue._tag === "Unexpected" ? " (unknown field)" : "")
    )
    .join(", ")

/** `AI_PROVIDERS` decoded, each key read from its variable: start-up fails naming what is wrong. */
const listedProviders = (raw: string, requestTimeout: Duration.Duration) =>
  Effect.gen(function*() {
    const duplicates = duplicateTopLevelKeys(raw)
    if (duplicates.length > 0) {
      return yield* invalid(
        "AI_PROVIDERS",
        `AI_PROVIDERS names ${duplicates.map((d) => JSON.stringify(d)).join(", ")} more than once`
      )
    }
    const decoded = yield* Either.match(decodeProviders(raw), {
      onLeft: (error) =>
        invalid(
          "AI_PROVIDERS",
          `AI_PROVIDERS must be JSON {"<name>":{"baseUrl":"https://…","apiKeyEnv":"<VARIABLE>"}}; wrong at ${
            wrongPaths(error)
          }`
        ),
      onRight: Effect.succeed
    })
    const providers = new Map<string, ProviderEndpoint>()
    for (const [name, entry] of Object.entries(decoded)) {
      const apiKey = yield* Config.redacted(entry.apiKeyEnv).pipe(
        Config.validate({
          message: `${entry.apiKeyEnv} must not be empty`,
          validation: (key) => Redacted.value(key).trim().length > 0
        }),
        Effect.mapError(() =>
          ConfigError.MissingData(
            [entry.apiKeyEnv],
            `AI_PROVIDERS: provider "${name}" reads its key from ${entry.apiKeyEnv}, which is not set (or empty)`
          )
        )
      )
      providers.set(name, {
        name,
        baseUrl: entry.baseUrl,
        apiKey: Option.some(apiKey),
        apiKeyVariable: entry.apiKeyEnv,
        requestTimeout: entry.requestTimeoutMs === undefined ? requestTimeout : Duration.millis(entry.requestTimeoutMs),
        headers: entry.headers ?? {},
        structuredOutputs: entry.structuredOutputs ?? false
      })
    }
    if (providers.size === 0) return yield* invalid("AI_PROVIDERS", "AI_PROVIDERS lists no provider")
    return providers
  })

export class ProviderSettings
  extends Context.Tag("ai-job-engine/ProviderSettings")<ProviderSettings, ProviderSettingsShape>()
{
  /**
   * Reads and checks the providers; a route naming one is checked against them by `ModelRouter`.
   * Without `AI_PROVIDERS`, the one provider is `ProviderConfig`'s (`AI_BASE_URL`, `AI_API_KEY`).
   */
  static readonly load: Effect.Effect<ProviderSettingsShape, ConfigError.ConfigError, ProviderConfig> = Effect.gen(
    function*() {
      const single = yield* ProviderConfig
      const legacy = yield* legacyConfig
      const limits = yield* limitsConfig
      const listed = yield* Config.option(Config.string("AI_PROVIDERS"))
      if (Option.isNone(listed)) {
        const baseUrl = single.baseUrl
        if (!isHttpUrl(baseUrl)) {
          return yield* invalid("AI_BASE_URL", "AI_BASE_URL must be an http(s) URL without credentials")
        }
        if (!Schema.is(ProviderName)(legacy.provider)) {
          return yield* invalid("AI_PROVIDER", "AI_PROVIDER must be 1 to 64 letters, digits, '.', '_' or '-'")
        }
        const only: ProviderEndpoint = {
          name: legacy.provider,
          baseUrl,
          apiKey: single.apiKey,
          apiKeyVariable: "AI_API_KEY",
          requestTimeout: legacy.requestTimeout,
          headers: {},
          structuredOutputs: false
        }
        return { providers: new Map([[only.name, only]]), defaultProvider: only.name, ...limits }
      }
      if (legacy.baseUrlSet) {
        return yield* invalid(
          "AI_BASE_URL",
          "AI_BASE_URL and AI_PROVIDERS are both set: give each provider's baseUrl in AI_PROVIDERS"
        )
      }
      const providers = yield* listedProviders(listed.value, legacy.requestTimeout)
      if (!providers.has(legacy.provider)) {
        return yield* invalid(
          "AI_PROVIDER",
          `AI_PROVIDER is "${legacy.provider}", which AI_PROVIDERS does not list (it lists ${
            [...providers.keys()].join(", ")
          })`
        )
      }
      return { providers, defaultProvider: legacy.provider, ...limits }
    }
  )

  /** Needs `ProviderConfig` (the single provider of a configuration without `AI_PROVIDERS`). */
  static readonly layer = Layer.effect(ProviderSettings, ProviderSettings.load)

  /** Settings given in code (tests, the simulation and the benches). */
  static readonly make = (
    providers: ReadonlyArray<Partial<ProviderEndpoint> & { readonly name: string }>,
    overrides: Partial<Omit<ProviderSettingsShape, "providers">> = {}
  ) =>
    Layer.succeed(ProviderSettings, {
      providers: new Map(
        providers.map((provider) => [provider.name, {
          baseUrl: "http://127.0.0.1:1",
          apiKey: Option.none(),
          apiKeyVariable: `${provider.name.toUpperCase()}_API_KEY`,
          requestTimeout: defaultRequestTimeout,
          headers: {},
          structuredOutputs: false,
          ...provider
        }])
      ),
      defaultProvider: overrides.defaultProvider ?? providers[0]?.name ?? "deepseek",
      maxRetryAfter: defaultMaxRetryAfter,
      maxResponseBytes: defaultMaxResponseBytes,
      fallbackMaxWait: defaultFallbackMaxWait,
      ...overrides
    })

  /** Whether any provider has a platform key (the embedded default runs synthetic without one). */
  static readonly anyKey = (settings: ProviderSettingsShape) =>
    [...settings.providers.values()].some((p) => Option.isSome(p.apiKey))
}
