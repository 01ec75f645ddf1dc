import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { AlwaysOnSampler, type ReadableSpan, type SpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect, Option, Redacted } from "effect"
import { currentTraceParent } from "../../../src/domain/TraceContext.js"
import { mysqlClientLayer } from "../../../src/layers/mysql/MysqlDatabase.js"
import { tracingThrough } from "../../../src/layers/telemetry/Tracing.js"
import { testServerUrl } from "../../support/scratchDatabase.js"

/**
 * What the exporting tracer does with @effect/sql's spans: by default no `sql.*` span reaches the
 * exporter, spans started inside a transaction hang off the span around it, and a trace context
 * captured inside a transaction (what job creation stores) names that exported span.
 * `TRACE_SQL=true` (`sqlSpans`) exports them again.
 */

const client = mysqlClientLayer(Redacted.make(testServerUrl), { maxConnections: 1 })

/** A job's creation in miniature: a transaction with statements, a nested span and the stored context. */
const createInTransaction = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return yield* sql.withTransaction(
    Effect.gen(function*() {
      yield* sql`SELECT 1 AS one`
      yield* sql`SELECT 2 AS two`.pipe(Effect.withSpan("outbox.write"))
      return yield* currentTraceParent
    })
  )
}).pipe(Effect.withSpan("job.create"))

/** Keeps every span the SDK ends, as an exporter would receive it. */
const collector = () => {
  const spans: Array<ReadableSpan> = []
  const processor: SpanProcessor = {
    onStart: () => {},
    onEnd: (span) => {
      spans.push(span)
    },
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve()
  }
  return { spans, processor }
}

const traced = (sqlSpans: boolean) =>
  Effect.gen(function*() {
    const { processor, spans } = collector()
    const stored = yield* createInTransaction.pipe(
      Effect.provide(tracingThrough("ai-job-engine-test", () => processor, new AlwaysOnSampler(), { sqlSpans })),
      Effect.provide(client),
      Effect.orDie
    )
    const named = (name: string): ReadableSpan => {
      const span = spans.find((s) => s.name === name)
      if (span === undefined) throw new Error(`no ${name} span among ${spans.map((s) => s.name).join(", ")}`)
      return span
    }
    return { stored, spans, named }
  })

describe("tracing @effect/sql's spans", () => {
  it.effect("by default no sql.* span is exported and nothing hangs off one", () =>
    Effect.gen(function*() {
      const { named, spans, stored } = yield* traced(false)
      expect(spans.map((s) => s.name).sort()).toEqual(["job.create", "outbox.write"])
      const create = named("job.create").spanContext()
      expect(named("outbox.write").parentSpanContext?.spanId).toBe(create.spanId)
      expect(named("outbox.write").spanContext().traceId).toBe(create.traceId)
      expect(Option.getOrUndefined(stored)).toBe(`00-${create.traceId}-${create.spanId}-01`)
    }))

  it.effect("with TRACE_SQL the transaction and every statement are spans of the trace", () =>
    Effect.gen(function*() {
      const { named, spans, stored } = yield* traced(true)
      expect(spans.map((s) => s.name).sort()).toEqual([
        "job.create",
        "outbox.write",
        "sql.execute",
        "sql.execute",
        "sql.transaction"
      ])
      const transaction = named("sql.transaction").spanContext()
      expect(named("sql.transaction").parentSpanContext?.spanId).toBe(named("job.create").spanContext().spanId)
      expect(named("outbox.write").parentSpanContext?.spanId).toBe(transaction.spanId)
      expect(Option.getOrUndefined(stored)).toBe(`00-${transaction.traceId}-${transaction.spanId}-01`)
    }))
})
