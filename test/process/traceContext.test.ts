import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Option, Queue, Redacted } from "effect"
import type { IncomingHttpHeaders } from "node:http"
import { signToken } from "../../src/http/AuthTokens.js"
import { chatCompletionBody, serveOnLoopback } from "../support/fakeProviderServer.js"
import { type ReceivedSpan, startOtlpReceiver } from "../support/otlpReceiver.js"
import { childEnv, ProcessTestError } from "./support/childProcess.js"
import { startProgram } from "./support/engine.js"

/**
 * Whose trace a request joins (the all-in-one program, exporting over OTLP/HTTP JSON): a client's
 * `traceparent` or `b3` is continued only with a valid token; anyone else starts a trace of its
 * own, linked to the one it sent. The provider is sent no trace context at all.
 */

const jwtSecret = "trace-context-secret-0123456789abcdefghij"
const providerKey = "sk-trace-context-provider-key-0123456789"

/** A W3C trace id and span id a client picked, and the headers that carry them. */
const clientContext = (digit: string) => {
  const traceId = `${digit.repeat(8)}0000000000000000000000ab`
  const spanId = `${digit.repeat(4)}0000000000cd`
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01`, b3: `${traceId}-${spanId}-1` }
}

const requestSpan = (method: string, path: string) => (spans: ReadonlyArray<ReceivedSpan>) =>
  Option.fromNullable(
    spans.find((span) => span.name === `http.server ${method}` && span.attributes["url.path"] === path)
  )

const traceHeaders = [
  "traceparent",
  "tracestate",
  "b3",
  "x-b3-traceid",
  "x-b3-spanid",
  "x-b3-sampled",
  "x-b3-parentspanid"
]

describe("trace context from clients", () => {
  it.live(
    "continued only with a valid token (otherwise a new trace linked to it); never sent to the provider",
    () =>
      Effect.gen(function*() {
        const receiver = yield* startOtlpReceiver
        const providerRequests = yield* Queue.unbounded<IncomingHttpHeaders>()
        const providerPort = yield* serveOnLoopback((req, res) => {
          Queue.unsafeOffer(providerRequests, req.headers)
          res.writeHead(200, { "content-type": "application/json" })
          res.end(chatCompletionBody({
            id: "chatcmpl-trace",
            content: JSON.stringify({ flashcards: [{ front: "What makes sugar?", back: "Photosynthesis." }] }),
            promptTokens: 20,
            completionTokens: 10
          }))
        }, new Set())
        const engine = yield* startProgram(
          "all-in-one",
          "trace-context",
          childEnv({
            AUTH_JWT_SECRET: jwtSecret,
            AI_GATEWAY: "openai",
            AI_BASE_URL: `http://127.0.0.1:${providerPort}`,
            AI_API_KEY: providerKey,
            OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
            OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
            OTEL_BSP_SCHEDULE_DELAY: "200"
          })
        )
        const token = yield* signToken(
          { sub: "trace-user", role: "USER", expiresInSeconds: 600 },
          Redacted.make(jwtSecret)
        )
        const send = (method: string, path: string, headers: Readonly<Record<string, string>>, body?: unknown) =>
          Effect.tryPromise({
            try: () =>
              fetch(`${engine.baseUrl}${path}`, {
                method,
                headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
                body: body === undefined ? undefined : JSON.stringify(body)
              }).then(async (response) => ({ status: response.status, text: await response.text() })),
            catch: (error) => new ProcessTestError({ message: String(error) })
          })

        const anonymous = clientContext("1")
        const forged = clientContext("2")
        const user = clientContext("3")
        expect((yield* send("GET", "/api/ai/jobs", { traceparent: anonymous.traceparent })).status).toBe(401)
        expect(
          (yield* send("GET", "/admin-api/ai/jobs", { b3: forged.b3, authorization: "Bearer not.a.token" })).status
        ).toBe(401)
        const created = yield* send("POST", "/api/ai/flashcard-generations", {
          traceparent: user.traceparent,
          authorization: `Bearer ${token}`
        }, {
          sourceText: "Plants make sugar from light, water and carbon dioxide.",
          count: 1
        })
        expect(created.status, created.text).toBe(202)

        // Unauthenticated: a trace of its own, linked to the context the client sent.
        for (
          const [context, method, path] of [[anonymous, "GET", "/api/ai/jobs"], [
            forged,
            "GET",
            "/admin-api/ai/jobs"
          ]] as const
        ) {
          const span = yield* receiver.waitFor(requestSpan(method, path), Duration.seconds(20))
          expect(span.traceId, path).not.toBe(context.traceId)
          expect(span.parentSpanId, path).toBeUndefined()
          expect(span.links, path).toContainEqual({ traceId: context.traceId, spanId: context.spanId })
        }
        // With a valid token: the client's trace, continued.
        const create = yield* receiver.waitFor(
          requestSpan("POST", "/api/ai/flashcard-generations"),
          Duration.seconds(20)
        )
        expect(create.traceId).toBe(user.traceId)
        expect(create.parentSpanId).toBe(user.spanId)

        // The provider call carries no trace context: neither the client's nor the engine's spans.
        const sent = yield* Queue.take(providerRequests).pipe(Effect.timeout("20 seconds"))
        expect(sent["authorization"]).toBe(`Bearer ${providerKey}`)
        for (const header of traceHeaders) expect(sent[header], header).toBeUndefined()
        expect(JSON.stringify(sent)).not.toContain(user.traceId)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
