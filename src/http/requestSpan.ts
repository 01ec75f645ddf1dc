import { Headers, HttpMiddleware, HttpServerRequest, HttpTraceContext } from "@effect/platform"
import { Effect, FiberRef, Option, type Tracer } from "effect"
import { ApiSettings } from "../config/ApiSettings.js"
import { constantTimeEquals } from "./Auth.js"
import { TokenVerifier } from "./TokenVerifier.js"

/**
 * Each request's span, `http.server <METHOD>`, in place of the platform's (which continues any
 * client's `traceparent`). A client's context is continued only with a valid token: a job carries
 * its trace across every process, and an anonymous caller must not pick its trace ids or hang
 * spans into another trace; it gets its own trace with a link to what it sent. Scrapes and probes
 * make no span: they would drown the jobs' ones.
 */

const untracedPaths = new Set(["/metrics", "/healthz", "/readyz"])

const bearerOf = (header: string | undefined): Option.Option<string> => {
  const match = /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i.exec((header ?? "").trim())
  return match === null ? Option.none() : Option.some(match[1] ?? "")
}

/** Whether the request's bearer token is a valid user token (HS256 or the identity provider's) or the runtime service token. */
const carriesValidToken = (request: HttpServerRequest.HttpServerRequest) =>
  Option.match(bearerOf(request.headers["authorization"]), {
    onNone: () => Effect.succeed(false),
    onSome: (token) =>
      Effect.gen(function*() {
        const settings = yield* ApiSettings
        if (Option.exists(settings.runtimeServiceToken, (expected) => constantTimeEquals(expected, token))) return true
        return Option.isSome(yield* Effect.option(Effect.flatMap(TokenVerifier, (verifier) => verifier.verify(token))))
      })
  })

/** The client's context as the span's parent (trusted), as a link (not trusted), or nothing. */
const placement = (request: HttpServerRequest.HttpServerRequest) =>
  Option.match(HttpTraceContext.fromHeaders(request.headers), {
    onNone: () => Effect.succeed({ root: true }),
    onSome: (client: Tracer.ExternalSpan) =>
      Effect.map(carriesValidToken(request), (trusted) =>
        trusted
          ? { parent: client }
          : {
            root: true,
            links: [{
              _tag: "SpanLink" as const,
              span: client,
              attributes: { "link.reason": "unauthenticated caller" }
            }]
          })
  })

export const requestSpan = HttpMiddleware.make((app) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const url = Option.getOrUndefined(HttpServerRequest.toURL(request))
    if (url !== undefined && untracedPaths.has(url.pathname)) return yield* app
    const name = (yield* HttpMiddleware.SpanNameGenerator)(request)
    const where = yield* placement(request)
    const redactedNames = yield* FiberRef.get(Headers.currentRedactedNames)
    return yield* Effect.useSpan(name, { ...where, kind: "server", captureStackTrace: false }, (span) => {
      span.attribute("http.request.method", request.method)
      if (url !== undefined) {
        url.username = url.username === "" ? "" : "REDACTED"
        url.password = url.password === "" ? "" : "REDACTED"
        span.attribute("url.full", url.toString())
        span.attribute("url.path", url.pathname)
        if (url.search !== "") span.attribute("url.query", url.search.slice(1))
        span.attribute("url.scheme", url.protocol.slice(0, -1))
      }
      const userAgent = request.headers["user-agent"]
      if (userAgent !== undefined) span.attribute("user_agent.original", userAgent)
      for (const [header, value] of Object.entries(Headers.redact(request.headers, redactedNames))) {
        span.attribute(`http.request.header.${header}`, String(value))
      }
      if (Option.isSome(request.remoteAddress)) span.attribute("client.address", request.remoteAddress.value)
      return Effect.withParentSpan(app, span).pipe(
        Effect.tap((response) => span.attribute("http.response.status_code", response.status))
      )
    })
  })
)
