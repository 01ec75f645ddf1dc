import { NodeSdk, Resource, Tracer as OtelTracer } from "@effect/opentelemetry"
import { OTLPTraceExporter as OtlpJsonTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { OTLPTraceExporter as OtlpProtoTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto"
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  type SpanProcessor,
  TraceIdRatioBasedSampler
} from "@opentelemetry/sdk-trace-base"
import { Context, Effect, Layer, Option, Tracer } from "effect"
import { randomBytes } from "node:crypto"
import { TelemetrySettings, type TraceExport, type TracesSampler } from "../../config/TelemetrySettings.js"

/**
 * Tracing: Effect's spans exported over OTLP/HTTP by the OpenTelemetry SDK, in batches (the
 * `OTEL_BSP_*` variables tune the batch). With no endpoint the layer is empty: Effect keeps its
 * own in-process spans (ids for log lines and the stored trace context) and exports nothing.
 *
 * Two costs are left out (docs/architecture.md §20.1): @effect/sql's spans (one per statement,
 * most of a job's spans) get no OpenTelemetry span unless `TRACE_SQL=true`, and no OpenTelemetry
 * context is built on each step of a traced fiber (nothing in the process reads it).
 */

export interface TracingOptions {
  /** Export @effect/sql's `sql.*` spans too (`TRACE_SQL=true`). */
  readonly sqlSpans: boolean
}

/** @effect/sql's own spans: `sql.execute` per statement, `sql.transaction`, `sql.Resolver.*`. */
const isSqlSpan = (name: string) => name.startsWith("sql.")

const randomHex = (bytes: number) => randomBytes(bytes).toString("hex")

/**
 * What an untraced `sql.*` span becomes: nothing is recorded or exported, it carries its parent's
 * ids (log lines and a trace context stored inside a transaction name a span that is exported),
 * and `DisablePropagation` makes spans started inside it children of that parent instead.
 */
const standInSpan = (
  name: string,
  parent: Option.Option<Tracer.AnySpan>,
  context: Context.Context<never>,
  kind: Tracer.SpanKind,
  startTime: bigint
): Tracer.Span => {
  const ids = Option.match(parent, {
    onNone: () => ({ traceId: randomHex(16), spanId: randomHex(8), sampled: false }),
    onSome: (p) => ({ traceId: p.traceId, spanId: p.spanId, sampled: p.sampled })
  })
  return {
    _tag: "Span",
    name,
    ...ids,
    parent,
    context: Context.add(context, Tracer.DisablePropagation, true),
    status: { _tag: "Started", startTime },
    attributes: new Map(),
    links: [],
    kind,
    attribute() {},
    event() {},
    end() {},
    addLinks() {}
  }
}

/** Effect's tracer over the OpenTelemetry one, without the `sql.*` spans unless asked for. */
const exportingTracer = (options: TracingOptions) =>
  Layer.unwrapEffect(
    Effect.map(OtelTracer.make, (otel) =>
      Layer.setTracer(
        Tracer.make({
          span: (name, parent, context, links, startTime, kind, spanOptions) =>
            !options.sqlSpans && isSqlSpan(name)
              ? standInSpan(name, parent, context, kind, startTime)
              : otel.span(name, parent, context, links, startTime, kind, spanOptions),
          // @effect/opentelemetry builds an OpenTelemetry context on every step of a traced fiber,
          // for OTel-instrumented libraries; there are none here, so that per-step cost is skipped.
          context: (execute) => execute()
        })
      ))
  )

const samplerOf = (name: TracesSampler, ratio: number): Sampler => {
  switch (name) {
    case "always_on":
      return new AlwaysOnSampler()
    case "always_off":
      return new AlwaysOffSampler()
    case "traceidratio":
      return new TraceIdRatioBasedSampler(ratio)
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() })
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) })
  }
}

const exporterOf = (traces: TraceExport) =>
  traces.protocol === "http/json"
    ? new OtlpJsonTraceExporter({ url: traces.tracesUrl })
    : new OtlpProtoTraceExporter({ url: traces.tracesUrl })

/**
 * Effect's spans handed to the processor `makeProcessor` builds, through the OpenTelemetry SDK; the
 * processor is flushed and shut down (bounded) when the layer closes.
 */
export const tracingThrough = (
  serviceName: string,
  makeProcessor: () => SpanProcessor,
  sampler: Sampler,
  options: TracingOptions
) =>
  exportingTracer(options).pipe(
    Layer.provide(OtelTracer.layerTracer),
    Layer.provide(
      Layer.suspend(() => NodeSdk.layerTracerProvider(makeProcessor(), { sampler, shutdownTimeout: "3 seconds" }))
    ),
    Layer.provide(Resource.layerFromEnv(Resource.configToAttributes({ serviceName })))
  )

/** The exporting SDK for `traces`: OTLP/HTTP in batches. */
export const otlpTracing = (serviceName: string, traces: TraceExport, options: TracingOptions) =>
  tracingThrough(
    serviceName,
    () => new BatchSpanProcessor(exporterOf(traces)),
    samplerOf(traces.sampler, traces.samplerRatio),
    options
  )

/** Tracing as `TelemetrySettings` says: the OTLP exporter, or nothing at all. */
export const TracingLive = Layer.unwrapEffect(
  Effect.map(TelemetrySettings, (settings) =>
    Option.match(settings.traces, {
      onNone: () => Layer.empty,
      onSome: (traces) => otlpTracing(settings.serviceName, traces, { sqlSpans: settings.sqlSpans })
    }))
)
