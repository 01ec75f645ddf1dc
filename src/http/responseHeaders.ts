import { HttpApiBuilder, HttpApp, HttpMiddleware, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import { createHash } from "node:crypto"

/**
 * Protective headers on every answer: no MIME sniffing, no referrer, nothing cached (answers
 * carry job data and, on the internal route, a key), no framing. JSON answers get a policy that
 * allows nothing; an HTML page (Swagger UI at `/docs`) gets one that allows exactly its own
 * inline script and style, by hash, computed from the page the first time it is served.
 */

const common = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
  "x-frame-options": "DENY"
} as const

const apiPolicy = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

const sha256 = (text: string) => `'sha256-${createHash("sha256").update(text, "utf8").digest("base64")}'`

const inlineScripts = /<script(?![^>]*\bsrc=)([^>]*)>([\s\S]*?)<\/script>/g
const inlineStyles = /<style[^>]*>([\s\S]*?)<\/style>/g
/** A script loaded from this origin (`src="/..."`): the page then allows `'self'` scripts. */
const ownScriptFiles = /<script[^>]*\bsrc\s*=\s*["']\/(?!\/)/
/** A data block (`type="application/json"`) is never run, so it needs no hash. */
const dataBlock = /\btype\s*=\s*["']?application\/json/i

/**
 * The policy an HTML page passes: its inline scripts and styles by hash, script files from this
 * origin when it loads any, images and fonts from itself or data: URLs, calls to this API.
 */
export const pagePolicy = (html: string): string => {
  const scripts = Array.from(html.matchAll(inlineScripts))
    .filter((match) => !dataBlock.test(match[1] ?? ""))
    .map((match) => sha256(match[2] ?? ""))
  if (ownScriptFiles.test(html)) scripts.unshift("'self'")
  const styles = Array.from(html.matchAll(inlineStyles)).map((match) => sha256(match[1] ?? ""))
  return [
    "default-src 'none'",
    `script-src ${scripts.length > 0 ? scripts.join(" ") : "'none'"}`,
    `style-src ${styles.length > 0 ? styles.join(" ") : "'none'"}`,
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'"
  ].join("; ")
}

const decoder = new TextDecoder()
/** The docs page is one response built once at start: its policy is computed once too. */
const policies = new WeakMap<Uint8Array, string>()

const policyFor = (response: HttpServerResponse.HttpServerResponse): string => {
  const body = response.body
  if (body._tag !== "Uint8Array" || !body.contentType.startsWith("text/html")) return apiPolicy
  const known = policies.get(body.body)
  if (known !== undefined) return known
  const policy = pagePolicy(decoder.decode(body.body))
  policies.set(body.body, policy)
  return policy
}

const withSecurityHeaders = (response: HttpServerResponse.HttpServerResponse) =>
  HttpServerResponse.setHeaders(response, { ...common, "content-security-policy": policyFor(response) })

/**
 * As a pre-response handler, so that answers made from errors get the headers too; and on the
 * returned answer, for one an outer middleware makes without running the app.
 */
export const securityHeaders = HttpMiddleware.make((app) =>
  Effect.zipRight(
    HttpApp.appendPreResponseHandler((_request, response) => Effect.sync(() => withSecurityHeaders(response))),
    Effect.map(app, withSecurityHeaders)
  )
)

/** Sets a header on this request's answer, whatever status it ends with (errors included). */
export const setAnswerHeader = (name: string, value: string) =>
  HttpApp.appendPreResponseHandler((_request, response) =>
    Effect.succeed(HttpServerResponse.setHeader(response, name, value))
  )

/** `Vary` with `name` added to whatever the answer varies on already. */
const varyingOn = (name: string) => (response: HttpServerResponse.HttpServerResponse) => {
  const current = (response.headers["vary"] ?? "").split(",").map((field) => field.trim()).filter((field) =>
    field !== ""
  )
  return current.some((field) => field.toLowerCase() === name.toLowerCase())
    ? response
    : HttpServerResponse.setHeader(response, "vary", [...current, name].join(", "))
}

/**
 * CORS (API middleware) for exactly `origins`; with none listed the API sends no CORS headers at
 * all. Every answer, a preflight's included and one to an origin not listed, says `Vary: Origin`:
 * it differs by origin, so a shared cache must not hand one origin's answer to another (the
 * platform's CORS sets it only beside an allowed origin, and a preflight's own `Vary` replaced it).
 */
export const corsLayer = (origins: ReadonlyArray<string>): Layer.Layer<never> => {
  if (origins.length === 0) return Layer.empty
  const allowed = new Set(origins)
  const cors = HttpMiddleware.cors({ allowedOrigins: (origin) => allowed.has(origin) })
  return HttpApiBuilder.middleware((app) =>
    Effect.zipRight(
      HttpApp.appendPreResponseHandler((_request, response) => Effect.succeed(varyingOn("Origin")(response))),
      cors(app)
    )
  )
}
