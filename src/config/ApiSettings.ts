import { Config, Context, Layer, Option, Redacted } from "effect"
import { defaultHttpTransport, httpTransportConfig, type HttpTransportSettings } from "./HttpTransportSettings.js"
import { defaultLiveStreams, liveStreamConfig, type LiveStreamSettings } from "./LiveStreamSettings.js"

/**
 * What the HTTP API needs beyond the shared configuration and its bearer tokens' settings
 * (`AuthSettings`): the runtime service token of the internal route, the platform switch, the
 * transport limits and the bounds on live streams.
 */
export interface ApiSettingsShape {
  /** `RUNTIME_SERVICE_TOKEN`: the internal credential-resolve route answers 401 to everyone when unset. */
  readonly runtimeServiceToken: Option.Option<Redacted.Redacted<string>>
  /** `AI_PLATFORM_ENABLED` (default true): false makes every route that creates AI work answer 503. */
  readonly platformEnabled: boolean
  /** Body limit, timeouts and CORS origins (`HTTP_MAX_BODY_BYTES`, `HTTP_*_TIMEOUT_MS`, `CORS_ALLOWED_ORIGINS`). */
  readonly transport: HttpTransportSettings
  /** Open streams and long polls per user and per process, and a stream's longest life (`SSE_MAX_*`). */
  readonly liveStreams: LiveStreamSettings
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
    transport: httpTransportConfig,
    liveStreams: liveStreamConfig
  })

  static readonly layer = Layer.effect(ApiSettings, ApiSettings.config)

  /** Explicit settings, for tests and the embedded program. */
  static readonly make = (settings: {
    readonly runtimeServiceToken?: string | undefined
    readonly platformEnabled?: boolean | undefined
    readonly transport?: Partial<HttpTransportSettings> | undefined
    readonly liveStreams?: Partial<LiveStreamSettings> | undefined
  } = {}) =>
    Layer.succeed(ApiSettings, {
      runtimeServiceToken: Option.map(Option.fromNullable(settings.runtimeServiceToken), Redacted.make),
      platformEnabled: settings.platformEnabled ?? true,
      transport: { ...defaultHttpTransport, ...settings.transport },
      liveStreams: { ...defaultLiveStreams, ...settings.liveStreams }
    })
}
