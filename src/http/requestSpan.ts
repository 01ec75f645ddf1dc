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

/**
 * A target whose URL serializes as it came: a path of plain characters (no dot segment, no
 * percent escape, no `//` authority) and a query of characters the URL parser leaves alone.
 */
const plainTarget = /^\/(?!\/)[A-Za-z0-9\-_~!$&()*+,;=:@/]*(?:\?[A-Za-z0-9\-_~!$&()*+,;=:@/?.%]*)?$/
/** A host the URL parser leaves alone: a canonical IPv4 address or a lower-case name, and a port of its own. */
const plainHost =
  /^(?:(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)|(?:[a-z0-9-]+\.)*[a-z][a-z0-9-]*)(?::[1-9]\d{0,4})?$/

interface UrlAttributes {
  readonly full: string
  readonly path: string
  readonly query: string
  readonly scheme: string
}

/**
 * The request's URL as the span records it (user and password redacted), as `HttpServerRequest.toURL`
 * reads it: plain targets on plain hosts (every request of the API's own clients) are read from the
 * strings, without parsing a URL and rewriting its credentials; anything else goes through `URL`.
 */
export const urlAttributesOf = (
  target: string,
  headers: Readonly<Record<string, unknown>>
): UrlAttributes | undefined => {
  const hostHeader = headers["host"]
  const host = typeof hostHeader === "string" ? hostHeader : "localhost"
  const scheme = headers["x-forwarded-proto"] === "https" ? "https" : "http"
  if (plainTarget.test(target) && plainHost.test(host) && !host.includes("xn--")) {
    const colon = host.lastIndexOf(":")
    const port = colon === -1 ? undefined : Number(host.slice(colon + 1))
    if (port === undefined || (port <= 65_535 && port !== (scheme === "https" ? 443 : 80))) {
      const question = target.indexOf("?")
      return {
        full: `${scheme}://${host}${target}`,
        path: question === -1 ? target : target.slice(0, question),
        query: question === -1 ? "" : target.slice(question + 1),
        scheme
      }
    }
  }
  let url: URL
  try {
    url = new URL(target, `${scheme}://${hostHeader === undefined ? "localhost" : String(hostHeader)}`)
  } catch {
    return undefined
  }
  url.username = url.username === "" ? "" : "REDACTED"
  url.password = url.password === "" ? "" : "REDACTED"
  return { full: url.toString(), path: url.pathname, query: url.search.slice(1), scheme: url.protocol.slice(0, -1) }
}

/** Which header names are redacted, for the names the fiber holds (the same list every request, in practice). */
const redactionsOf = (() => {
  const known = new WeakMap<ReadonlyArray<string | RegExp>, (name: string) => boolean>()
  return (names: ReadonlyArray<string | RegExp>) => {
    const cached = known.get(names)
    if (cached !== undefined) return cached
    const exact = new Set(names.flatMap((name) => (typeof name === "string" ? [name.toLowerCase()] : [])))
    const patterns = names.filter((name): name is RegExp => typeof name !== "string")
    const redacted = (name: string) => exact.has(name) || patterns.some((pattern) => pattern.test(name))
    known.set(names, redacted)
    return redacted
  }
})()

export const requestSpan = HttpMiddleware.make((app) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const url = urlAttributesOf(request.url, request.headers)
    if (url !== undefined && untracedPaths.has(url.path)) return yield* app
    const name = (yield* HttpMiddleware.SpanNameGenerator)(request)
    const where = yield* placement(request)
    const redacted = redactionsOf(yield* FiberRef.get(Headers.currentRedactedNames))
    return yield* Effect.useSpan(name, { ...where, kind: "server", captureStackTrace: false }, (span) => {
      span.attribute("http.request.method", request.method)
      if (url !== undefined) {
        span.attribute("url.full", url.full)
        span.attribute("url.path", url.path)
        if (url.query !== "") span.attribute("url.query", url.query)
        span.attribute("url.scheme", url.scheme)
      }
      const headers = request.headers
      const userAgent = headers["user-agent"]
      if (userAgent !== undefined) span.attribute("user_agent.original", userAgent)
      for (const header of Object.keys(headers)) {
        span.attribute(`http.request.header.${header}`, redacted(header) ? "<redacted>" : String(headers[header]))
      }
      if (Option.isSome(request.remoteAddress)) span.attribute("client.address", request.remoteAddress.value)
      return Effect.withParentSpan(app, span).pipe(
        Effect.tap((response) => span.attribute("http.response.status_code", response.status))
      )
    })
  })
)
