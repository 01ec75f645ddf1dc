import { Config, ConfigError, Context, Effect, Layer, Option, Redacted } from "effect"
import { HttpConfig } from "./EngineConfig.js"
import { defaultHttpTransport, httpTransportConfig, type HttpTransportSettings } from "./HttpTransportSettings.js"

/**
 * What the HTTP API needs beyond the shared configuration: the JWT secret (required here),
 * the runtime service token of the internal route, and the platform switch.
 */
export interface ApiSettingsShape {
  /** `AUTH_JWT_SECRET`: HS256 key of the bearer tokens (at least 32 characters). */
  readonly jwtSecret: Redacted.Redacted<string>
  /** `RUNTIME_SERVICE_TOKEN`: the internal credential-resolve route answers 401 to everyone when unset. */
  readonly runtimeServiceToken: Option.Option<Redacted.Redacted<string>>
  /** `AI_PLATFORM_ENABLED` (default true): false makes every route that creates AI work answer 503. */
  readonly platformEnabled: boolean
  /** Body limit, timeouts and CORS origins (`HTTP_MAX_BODY_BYTES`, `HTTP_*_TIMEOUT_MS`, `CORS_ALLOWED_ORIGINS`). */
  readonly transport: HttpTransportSettings
}

export class ApiSettings extends Context.Tag("ai-job-engine/http/ApiSettings")<ApiSettings, ApiSettingsShape>() {
  static readonly config = Config.all({
    runtimeServiceToken: Config.option(
      Config.redacted("RUNTIME_SERVICE_TOKEN").pipe(
        Config.validate({
          message: "RUNTIME_SERVICE_TOKEN must be at least 32 characters",
          validation: (value) => Redacted.value(value).length >= 32
        })
      )
    ),
    platformEnabled: Config.boolean("AI_PLATFORM_ENABLED").pipe(Config.withDefault(true)),
    transport: httpTransportConfig
  })

  /**
   * From the environment, with the JWT secret given: the embedded program generates one per run
   * when `AUTH_JWT_SECRET` is unset, and reads everything else exactly as the API program does.
   */
  static readonly layerWithSecret = (jwtSecret: Redacted.Redacted<string>) =>
    Layer.effect(ApiSettings, Effect.map(ApiSettings.config, (rest) => ApiSettings.of({ jwtSecret, ...rest })))

  /** From the environment; `AUTH_JWT_SECRET` must be set (it is optional in `HttpConfig`). */
  static readonly layer = Layer.unwrapEffect(
    Effect.gen(function* () {
      const http = yield* HttpConfig
      const jwtSecret = yield* Option.match(http.authJwtSecret, {
        onNone: () =>
          Effect.fail(ConfigError.MissingData(["AUTH_JWT_SECRET"], "AUTH_JWT_SECRET must be set: the API verifies bearer tokens with it")),
        onSome: Effect.succeed
      })
      return ApiSettings.layerWithSecret(jwtSecret)
    })
  ).pipe(Layer.provide(HttpConfig.layer))

  /** Explicit settings, for tests and the embedded program. */
  static readonly make = (settings: {
    readonly jwtSecret: string
    readonly runtimeServiceToken?: string | undefined
    readonly platformEnabled?: boolean | undefined
    readonly transport?: Partial<HttpTransportSettings> | undefined
  }) =>
    Layer.succeed(ApiSettings, {
      jwtSecret: Redacted.make(settings.jwtSecret),
      runtimeServiceToken: Option.map(Option.fromNullable(settings.runtimeServiceToken), Redacted.make),
      platformEnabled: settings.platformEnabled ?? true,
      transport: { ...defaultHttpTransport, ...settings.transport }
    })
}
