import { NodeSdk } from "@effect/opentelemetry"
import { OTLPTraceExporter as OtlpJsonTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { OTLPTraceExporter as OtlpProtoTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto"
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler
} from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, Option } from "effect"
import { TelemetrySettings, type TraceExport, type TracesSampler } from "../../config/TelemetrySettings.js"

/**
 * Tracing: Effect's spans exported over OTLP/HTTP by the OpenTelemetry SDK, in batches (the
 * `OTEL_BSP_*` variables tune the batch). With no endpoint the layer is empty: Effect keeps its
 * own in-process spans (ids for log lines and the stored trace context) and exports nothing.
 */

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

/** The exporting SDK for `traces`; flushed and shut down (bounded) when the process stops. */
export const otlpTracing = (serviceName: string, traces: TraceExport) =>
  NodeSdk.layer(() => ({
    resource: { serviceName },
    spanProcessor: new BatchSpanProcessor(exporterOf(traces)),
    tracerConfig: { sampler: samplerOf(traces.sampler, traces.samplerRatio) },
    shutdownTimeout: "3 seconds"
  }))

/** Tracing as `TelemetrySettings` says: the OTLP exporter, or nothing at all. */
export const TracingLive = Layer.unwrapEffect(
  Effect.map(TelemetrySettings, (settings) =>
    Option.match(settings.traces, {
      onNone: () => Layer.empty,
      onSome: (traces) => Layer.discard(otlpTracing(settings.serviceName, traces))
    })
  )
)
