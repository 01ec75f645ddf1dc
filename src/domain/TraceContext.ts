import { Effect, Option, Schema, Tracer } from "effect"

/**
 * A W3C `traceparent` (version 00): the span context a job carries from the request that created
 * it to the dispatcher and the workers (`ai_job.trace_parent`), so one trace holds the job's
 * whole life across processes. Ids only: nothing of the job's content.
 */
export const TraceParent = Schema.String.pipe(
  Schema.pattern(/^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/),
  // W3C: an all-zero trace id or span id is invalid.
  Schema.filter((value) =>
    !value.startsWith("00-00000000000000000000000000000000-") && !value.includes("-0000000000000000-")
  ),
  Schema.brand("TraceParent")
)
export type TraceParent = typeof TraceParent.Type

const decodeTraceParent = Schema.decodeUnknownOption(TraceParent)

/** The `traceparent` of a span (sampled flag kept, so a sampled-out request stays sampled out downstream). */
export const traceParentOf = (span: { readonly traceId: string; readonly spanId: string; readonly sampled: boolean }) =>
  decodeTraceParent(`00-${span.traceId}-${span.spanId}-${span.sampled ? "01" : "00"}`)

export const currentTraceParent: Effect.Effect<Option.Option<TraceParent>> = Effect.map(
  Effect.option(Effect.currentParentSpan),
  Option.flatMap(traceParentOf)
)

/** The remote parent a stored `traceparent` stands for: spans started under it join its trace. */
export const externalParent = (traceParent: TraceParent): Tracer.ExternalSpan => {
  // The pattern fixes every field's place: `00-<32 hex>-<16 hex>-<2 hex>`.
  const flags = Number.parseInt(traceParent.slice(53, 55), 16)
  return Tracer.externalSpan({
    traceId: traceParent.slice(3, 35),
    spanId: traceParent.slice(36, 52),
    sampled: (flags & 1) === 1
  })
}

export const storedParent = (column: string | null | undefined): Option.Option<Tracer.ExternalSpan> =>
  Option.map(decodeTraceParent(column), externalParent)

/** A span's placement: under the stored context, or a trace of its own when the row has none. */
export const storedPlacement = (
  column: string | null | undefined
): { readonly parent: Tracer.ExternalSpan } | { readonly root: true } =>
  Option.match(storedParent(column), {
    onNone: () => ({ root: true }) as const,
    onSome: (parent) => ({ parent })
  })

/**
 * Runs `effect` as a child of the stored context when there is one (the job's trace); a row
 * written before trace contexts were stored runs under whatever span is current.
 */
export const withStoredParent = (column: string | null | undefined) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Option.match(storedParent(column), {
    onNone: () => effect,
    onSome: (parent) => Effect.withParentSpan(effect, parent)
  })
