import { Config, Context, Layer, Option, Redacted } from "effect"

/**
 * Telemetry settings, read from the standard OpenTelemetry variables so any collector's docs
 * apply: tracing is on only when an OTLP endpoint is set (and `OTEL_SDK_DISABLED` is not true);
 * otherwise nothing is exported and no exporter is built. Metrics are Effect `Metric`s served
 * as Prometheus text, on `PORT` by API processes and on `METRICS_PORT` by workers and dispatchers.
 */

export type OtlpProtocol = "http/protobuf" | "http/json"

/** `OTEL_TRACES_SAMPLER`: the SDK's names (`parentbased_always_on` is the default). */
export type TracesSampler =
  | "always_on"
  | "always_off"
  | "traceidratio"
  | "parentbased_always_on"
  | "parentbased_always_off"
  | "parentbased_traceidratio"

export interface TraceExport {
  /** The full URL spans are posted to (`…/v1/traces`). */
  readonly tracesUrl: string
  readonly protocol: OtlpProtocol
  readonly sampler: TracesSampler
  /** `OTEL_TRACES_SAMPLER_ARG`: the ratio of the `*traceidratio` samplers, 0..1. */
  readonly samplerRatio: number
}

export interface TelemetrySettingsShape {
  /** `service.name` of every span this process exports. */
  readonly serviceName: string
  /** None: tracing off (no endpoint, `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`). */
  readonly traces: Option.Option<TraceExport>
  /**
   * `TRACE_SQL=true`: also export @effect/sql's `sql.execute` / `sql.transaction` spans (one per
   * statement, most of a job's spans). Off by default: they cost more than the rest of the trace.
   */
  readonly sqlSpans: boolean
  /** Workers and dispatchers: the port of their `/metrics` + `/healthz` listener (none: no listener). */
  readonly metricsPort: Option.Option<number>
  /** When set, `/metrics` answers only `Authorization: Bearer <METRICS_TOKEN>` (or a SUPER_ADMIN token on the API). */
  readonly metricsToken: Option.Option<Redacted.Redacted<string>>
}

const samplers: ReadonlyArray<TracesSampler> = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio"
]

/** The OTLP specification: a signal-specific endpoint is used as given, the generic one gets `v1/traces` appended. */
export const tracesUrlOf = (
  endpoints: { readonly traces: Option.Option<string>; readonly generic: Option.Option<string> }
) =>
  Option.orElse(
    endpoints.traces,
    () => Option.map(endpoints.generic, (base) => `${base.endsWith("/") ? base : `${base}/`}v1/traces`)
  )

const httpUrl = (name: string) =>
  Config.string(name).pipe(
    Config.validate({
      message: `${name} must be an http(s) URL such as http://collector:4318`,
      validation: (value) => {
        try {
          const url = new URL(value)
          return url.protocol === "http:" || url.protocol === "https:"
        } catch {
          return false
        }
      }
    })
  )

const protocol = (name: string) =>
  Config.string(name).pipe(
    Config.validate({
      message: `${name} must be http/protobuf or http/json (grpc is not supported)`,
      validation: (value): value is OtlpProtocol => value === "http/protobuf" || value === "http/json"
    }),
    Config.map((value): OtlpProtocol => (value === "http/json" ? "http/json" : "http/protobuf"))
  )

const sampler = Config.string("OTEL_TRACES_SAMPLER").pipe(
  Config.validate({
    message: `OTEL_TRACES_SAMPLER must be one of ${samplers.join(", ")}`,
    validation: (value) => samplers.some((s) => s === value)
  }),
  Config.map((value) => samplers.find((s) => s === value) ?? "parentbased_always_on"),
  Config.withDefault<TracesSampler>("parentbased_always_on")
)

const samplerRatio = Config.number("OTEL_TRACES_SAMPLER_ARG").pipe(
  Config.validate({
    message: "OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1",
    validation: (n) => n >= 0 && n <= 1
  }),
  Config.withDefault(1)
)

const port = (name: string) =>
  Config.integer(name).pipe(
    Config.validate({ message: `${name} must be a port number (0 to 65535)`, validation: (n) => n >= 0 && n <= 65_535 })
  )

/** Reads the settings; `defaultServiceName` is the process's (`ai-job-engine-worker`, ...). */
export const telemetryConfig = (defaultServiceName: string) =>
  Config.all({
    serviceName: Config.nonEmptyString("OTEL_SERVICE_NAME").pipe(Config.withDefault(defaultServiceName)),
    sqlSpans: Config.boolean("TRACE_SQL").pipe(Config.withDefault(false)),
    disabled: Config.boolean("OTEL_SDK_DISABLED").pipe(Config.withDefault(false)),
    exporter: Config.literal("otlp", "none")("OTEL_TRACES_EXPORTER").pipe(Config.withDefault("otlp" as const)),
    tracesEndpoint: Config.option(httpUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")),
    endpoint: Config.option(httpUrl("OTEL_EXPORTER_OTLP_ENDPOINT")),
    tracesProtocol: Config.option(protocol("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")),
    protocol: protocol("OTEL_EXPORTER_OTLP_PROTOCOL").pipe(Config.withDefault<OtlpProtocol>("http/protobuf")),
    sampler,
    samplerRatio,
    metricsPort: Config.option(port("METRICS_PORT")),
    metricsToken: Config.option(
      Config.redacted("METRICS_TOKEN").pipe(
        Config.validate({
          message: "METRICS_TOKEN must be at least 32 characters",
          validation: (t) => Redacted.value(t).length >= 32
        })
      )
    )
  }).pipe(
    Config.map((c): TelemetrySettingsShape => {
      const url = tracesUrlOf({ traces: c.tracesEndpoint, generic: c.endpoint })
      const on = !c.disabled && c.exporter === "otlp"
      return {
        serviceName: c.serviceName,
        traces: on
          ? Option.map(url, (tracesUrl) => ({
            tracesUrl,
            protocol: Option.getOrElse(c.tracesProtocol, () => c.protocol),
            sampler: c.sampler,
            samplerRatio: c.samplerRatio
          }))
          : Option.none(),
        sqlSpans: c.sqlSpans,
        metricsPort: c.metricsPort,
        metricsToken: c.metricsToken
      }
    })
  )

/** Tracing off, no listener, no token: what a process gets unless it reads the environment. */
const telemetryOff: TelemetrySettingsShape = {
  serviceName: "ai-job-engine",
  traces: Option.none(),
  sqlSpans: false,
  metricsPort: Option.none(),
  metricsToken: Option.none()
}

/**
 * A reference with that default, so the HTTP API, tests and the simulation need not provide it;
 * the programs provide it from the environment (`TelemetrySettings.layer`).
 */
export class TelemetrySettings extends Context.Reference<TelemetrySettings>()("ai-job-engine/TelemetrySettings", {
  defaultValue: (): TelemetrySettingsShape => telemetryOff
}) {
  static readonly layer = (defaultServiceName: string) =>
    Layer.effect(TelemetrySettings, telemetryConfig(defaultServiceName))
  static readonly make = (settings: Partial<TelemetrySettingsShape>) =>
    Layer.succeed(TelemetrySettings, { ...telemetryOff, ...settings })
}
