import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Logger, Option, Schema } from "effect"
import { telemetryConfig } from "../../../src/config/TelemetrySettings.js"
import { currentTraceParent, externalParent, TraceParent, withStoredParent } from "../../../src/domain/TraceContext.js"
import { jsonLoggerWithTrace } from "../../../src/layers/logging.js"

const decode = Schema.decodeUnknownSync(TraceParent)

describe("W3C trace context stored with a job", () => {
  it.effect("the current span's traceparent, and spans under the stored parent continue its trace", () =>
    Effect.gen(function*() {
      const stored = yield* currentTraceParent.pipe(Effect.withSpan("http.server POST"))
      expect(Option.isSome(stored)).toBe(true)
      const value = Option.getOrThrow(stored)
      expect(value).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
      const [, traceId, spanId] = value.split("-")
      const child = yield* Effect.currentSpan.pipe(
        Effect.withSpan("worker.run"),
        withStoredParent(Option.getOrNull(stored))
      )
      expect(child.traceId).toBe(traceId)
      expect(Option.map(child.parent, (p) => p.spanId)).toEqual(Option.some(spanId))
    }))

  it.effect("a sampled-out span stores a sampled-out traceparent", () =>
    Effect.gen(function*() {
      const parent = externalParent(decode("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"))
      const stored = yield* currentTraceParent.pipe(Effect.withParentSpan(parent))
      expect(Option.getOrThrow(stored)).toBe("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
    }))

  it.effect("a row without a valid traceparent runs under the current span", () =>
    Effect.gen(function*() {
      for (const column of [null, undefined, "", "00-not-a-trace"]) {
        const [outer, child] = yield* Effect.gen(function*() {
          const outer = yield* Effect.currentSpan
          const child = yield* Effect.currentSpan.pipe(Effect.withSpan("worker.run"), withStoredParent(column))
          return [outer, child] as const
        }).pipe(Effect.withSpan("worker.poll"))
        expect(child.traceId).toBe(outer.traceId)
        expect(Option.map(child.parent, (p) => p.spanId)).toEqual(Option.some(outer.spanId))
      }
    }))

  it.effect("outside any span there is nothing to store", () =>
    Effect.map(currentTraceParent, (tp) => expect(Option.isNone(tp)).toBe(true)))

  it("decodes valid traceparents and refuses malformed or all-zero ones", () => {
    expect(externalParent(decode("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")).sampled).toBe(false)
    expect(externalParent(decode("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")).sampled).toBe(true)
    // Only the sampled bit of the flags counts.
    expect(externalParent(decode("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03")).sampled).toBe(true)
    expect(externalParent(decode("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-02")).sampled).toBe(false)
    expect(externalParent(decode("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))).toMatchObject({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7"
    })
    for (
      const bad of [
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"
      ]
    ) expect(() => decode(bad), bad).toThrow()
  })
})

describe("JSON log lines joined to traces", () => {
  const capture = () => {
    const lines: Array<Record<string, unknown>> = []
    const layer = Logger.replace(
      Logger.defaultLogger,
      Logger.map(jsonLoggerWithTrace, (line) => {
        lines.push(JSON.parse(line))
      })
    )
    return { lines, layer }
  }

  it.effect("a line inside a span carries trace_id and span_id; one outside carries neither", () => {
    const { layer, lines } = capture()
    return Effect.gen(function*() {
      const span = yield* Effect.gen(function*() {
        yield* Effect.logInfo("inside").pipe(Effect.annotateLogs({ jobId: "j-1" }))
        return yield* Effect.currentSpan
      }).pipe(Effect.withSpan("pipeline.execute"))
      yield* Effect.logInfo("outside")
      expect(lines[0]).toMatchObject({
        message: "inside",
        trace_id: span.traceId,
        span_id: span.spanId,
        annotations: { jobId: "j-1" }
      })
      expect(lines[1]?.["message"]).toBe("outside")
      expect(lines[1]).not.toHaveProperty("trace_id")
      expect(lines[1]).not.toHaveProperty("span_id")
    }).pipe(Effect.provide(layer))
  })
})

describe("telemetry settings from the standard variables", () => {
  const read = (env: Record<string, string>) =>
    Effect.withConfigProvider(
      telemetryConfig("ai-job-engine-worker"),
      ConfigProvider.fromMap(new Map(Object.entries(env)))
    )

  it.effect("no endpoint: tracing off, the process's default service name", () =>
    Effect.map(read({}), (s) => {
      expect(s.serviceName).toBe("ai-job-engine-worker")
      expect(Option.isNone(s.traces)).toBe(true)
    }))

  it.effect("the generic endpoint gets v1/traces, protobuf by default, parent-based sampling", () =>
    Effect.map(read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_SERVICE_NAME: "w1" }), (s) => {
      expect(s.serviceName).toBe("w1")
      expect(s.traces).toEqual(
        Option.some({
          tracesUrl: "http://collector:4318/v1/traces",
          protocol: "http/protobuf",
          sampler: "parentbased_always_on",
          samplerRatio: 1
        })
      )
    }))

  it.effect("a traces endpoint is used as given; json protocol and a ratio sampler are read", () =>
    Effect.map(
      read({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://ignored:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://c:4318/custom",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
        OTEL_TRACES_SAMPLER_ARG: "0.25"
      }),
      (s) =>
        expect(s.traces).toEqual(
          Option.some({
            tracesUrl: "http://c:4318/custom",
            protocol: "http/json",
            sampler: "parentbased_traceidratio",
            samplerRatio: 0.25
          })
        )
    ))

  it.effect("OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none turn tracing off despite an endpoint", () =>
    Effect.gen(function*() {
      const disabled = yield* read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" })
      const none = yield* read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" })
      expect(Option.isNone(disabled.traces)).toBe(true)
      expect(Option.isNone(none.traces)).toBe(true)
    }))

  it.effect("grpc, an unknown sampler or a ratio above 1 fail at start naming the variable", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<Record<string, string>> = [
        { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" },
        { OTEL_TRACES_SAMPLER: "sometimes" },
        { OTEL_TRACES_SAMPLER_ARG: "2" },
        { METRICS_TOKEN: "short" }
      ]
      for (const env of cases) {
        const error = yield* Effect.flip(read(env))
        expect(String(error)).toContain(Object.keys(env).at(-1))
      }
    }))
})
