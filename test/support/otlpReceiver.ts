import { Duration, Effect, Option, Schedule, Schema } from "effect"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"

/**
 * A small OTLP/HTTP receiver for tests (JSON protocol, `POST /v1/traces`): it keeps every span
 * the engine's processes export, with its service name, so a test can read whole traces. A
 * protobuf request is answered 415, so a process exporting in the wrong protocol shows up.
 */

const AnyValue: Schema.Schema<AnyValue> = Schema.suspend(() =>
  Schema.Struct({
    stringValue: Schema.optional(Schema.String),
    boolValue: Schema.optional(Schema.Boolean),
    intValue: Schema.optional(Schema.Union(Schema.Number, Schema.String)),
    doubleValue: Schema.optional(Schema.Number),
    arrayValue: Schema.optional(Schema.Struct({ values: Schema.optional(Schema.Array(AnyValue)) }))
  })
)
interface AnyValue {
  readonly stringValue?: string | undefined
  readonly boolValue?: boolean | undefined
  readonly intValue?: number | string | undefined
  readonly doubleValue?: number | undefined
  readonly arrayValue?: { readonly values?: ReadonlyArray<AnyValue> | undefined } | undefined
}

const KeyValue = Schema.Struct({ key: Schema.String, value: AnyValue })
const Attributes = Schema.optionalWith(Schema.Array(KeyValue), { default: () => [] })

const Span = Schema.Struct({
  traceId: Schema.String,
  spanId: Schema.String,
  parentSpanId: Schema.optional(Schema.String),
  name: Schema.String,
  kind: Schema.optional(Schema.Number),
  attributes: Attributes,
  events: Schema.optionalWith(Schema.Array(Schema.Struct({ name: Schema.String, attributes: Attributes })), {
    default: () => []
  }),
  links: Schema.optionalWith(Schema.Array(Schema.Struct({ traceId: Schema.String, spanId: Schema.String })), {
    default: () => []
  }),
  status: Schema.optional(
    Schema.Struct({ code: Schema.optional(Schema.Number), message: Schema.optional(Schema.String) })
  )
})

const ExportTraceServiceRequest = Schema.parseJson(
  Schema.Struct({
    resourceSpans: Schema.Array(
      Schema.Struct({
        resource: Schema.optional(Schema.Struct({ attributes: Attributes })),
        scopeSpans: Schema.Array(
          Schema.Struct({ spans: Schema.optionalWith(Schema.Array(Span), { default: () => [] }) })
        )
      })
    )
  })
)
const decodeRequest = Schema.decodeUnknownEither(ExportTraceServiceRequest)

export type AttributeValue = string | number | boolean | ReadonlyArray<AttributeValue>

const valueOf = (value: AnyValue): AttributeValue =>
  value.stringValue ??
    value.boolValue ??
    (value.intValue !== undefined ? Number(value.intValue) : undefined) ??
    value.doubleValue ??
    (value.arrayValue?.values ?? []).map(valueOf)

const attributesOf = (list: ReadonlyArray<typeof KeyValue.Type>) =>
  Object.fromEntries(list.map(({ key, value }) => [key, valueOf(value)])) as Readonly<Record<string, AttributeValue>>

export interface ReceivedSpan {
  readonly service: string
  readonly traceId: string
  readonly spanId: string
  /** Undefined for a root span (OTLP sends an empty string or nothing). */
  readonly parentSpanId: string | undefined
  readonly name: string
  readonly kind: number | undefined
  readonly attributes: Readonly<Record<string, AttributeValue>>
  readonly events: ReadonlyArray<
    { readonly name: string; readonly attributes: Readonly<Record<string, AttributeValue>> }
  >
  readonly links: ReadonlyArray<{ readonly traceId: string; readonly spanId: string }>
  readonly statusCode: number | undefined
}

export interface OtlpReceiver {
  /** The base URL to give as `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  readonly endpoint: string
  readonly spans: () => ReadonlyArray<ReceivedSpan>
  /** Requests that could not be read (wrong protocol, malformed body). */
  readonly rejected: () => ReadonlyArray<string>
  /** Polls the received spans until `done` holds (the exporters send in batches). */
  readonly waitFor: <A>(
    find: (spans: ReadonlyArray<ReceivedSpan>) => Option.Option<A>,
    timeout: Duration.DurationInput
  ) => Effect.Effect<A, Error>
}

/** Starts the receiver on a free port of 127.0.0.1; it closes with the scope. */
export const startOtlpReceiver = Effect.gen(function*() {
  const received: Array<ReceivedSpan> = []
  const rejected: Array<string> = []
  const server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      if (request.method !== "POST" || request.url !== "/v1/traces") {
        rejected.push(`${request.method} ${request.url}`)
        response.writeHead(404).end()
        return
      }
      if (!(request.headers["content-type"] ?? "").startsWith("application/json")) {
        rejected.push(`content-type ${request.headers["content-type"]}`)
        response.writeHead(415).end()
        return
      }
      const decoded = decodeRequest(Buffer.concat(chunks).toString("utf8"))
      if (decoded._tag === "Left") {
        rejected.push(String(decoded.left))
        response.writeHead(400).end()
        return
      }
      for (const resourceSpans of decoded.right.resourceSpans) {
        const resource = attributesOf(resourceSpans.resource?.attributes ?? [])
        const service = String(resource["service.name"] ?? "")
        for (const scope of resourceSpans.scopeSpans) {
          for (const span of scope.spans) {
            received.push({
              service,
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId === undefined || span.parentSpanId === "" ? undefined : span.parentSpanId,
              name: span.name,
              kind: span.kind,
              attributes: attributesOf(span.attributes),
              events: span.events.map((event) => ({ name: event.name, attributes: attributesOf(event.attributes) })),
              links: span.links,
              statusCode: span.status?.code
            })
          }
        }
      }
      response.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  yield* Effect.acquireRelease(
    Effect.async<void>((resume) => {
      server.listen(0, "127.0.0.1", () => {
        resume(Effect.void)
      })
    }),
    () =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
      })
  )
  const { port } = server.address() as AddressInfo
  const receiver: OtlpReceiver = {
    endpoint: `http://127.0.0.1:${port}`,
    spans: () => [...received],
    rejected: () => [...rejected],
    waitFor: <A>(find: (spans: ReadonlyArray<ReceivedSpan>) => Option.Option<A>, timeout: Duration.DurationInput) =>
      Effect.suspend(() =>
        Option.match(find(received), {
          onNone: (): Effect.Effect<A, Error> => Effect.fail(new Error("not yet")),
          onSome: (found) => Effect.succeed(found)
        })
      ).pipe(
        Effect.retry(Schedule.spaced("100 millis")),
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () =>
            new Error(`spans not received in time; got ${received.map((s) => `${s.service}:${s.name}`).join(", ")}`)
        })
      )
  }
  return receiver
})
