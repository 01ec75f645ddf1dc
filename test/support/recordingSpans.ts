import { Effect, Option, Tracer } from "effect"

export interface SeenSpan {
  readonly name: string
  readonly kind: Tracer.SpanKind
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly attributes: ReadonlyMap<string, unknown>
}

/** Runs `body` under a tracer that keeps every span it starts (Effect's own spans, recorded). */
export const recordingSpans = <A, E, R>(body: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const native = yield* Effect.tracer
    const spans: Array<Tracer.Span> = []
    const tracer = Tracer.make({
      span: (name, parent, context, links, startTime, kind, options) => {
        const span = native.span(name, parent, context, links, startTime, kind, options)
        spans.push(span)
        return span
      },
      context: (f, fiber) => native.context(f, fiber)
    })
    const result = yield* Effect.withTracer(body, tracer)
    const seen = spans.map((span): SeenSpan => ({
      name: span.name,
      kind: span.kind,
      traceId: span.traceId,
      spanId: span.spanId,
      parentSpanId: Option.getOrUndefined(Option.map(span.parent, (parent) => parent.spanId)),
      attributes: span.attributes
    }))
    return { result, seen }
  })
