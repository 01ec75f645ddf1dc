import { HttpApi, HttpApp, HttpMiddleware, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Clock, Effect } from "effect"
import { httpRequestDuration, observe } from "../services/EngineMetrics.js"
import { AiJobApi } from "./Api.js"

/**
 * Every HTTP answer counted and timed by method, route template and status. The route is the
 * template (`/api/ai/jobs/:jobId`), never the path, so a label never holds an id; a path no
 * route matches is `unmatched`.
 */

interface RouteTemplate {
  readonly method: string
  readonly template: string
  /** The template's segments: a literal, or `undefined` for a parameter (any non-empty segment). */
  readonly segments: ReadonlyArray<string | undefined>
}

const routeTemplate = (method: string, template: string): RouteTemplate => ({
  method,
  template,
  segments: template.split("/").map((part) => (part.startsWith(":") ? undefined : part))
})

const templates: ReadonlyArray<RouteTemplate> = (() => {
  const found: Array<RouteTemplate> = []
  HttpApi.reflect(AiJobApi, {
    onGroup: () => undefined,
    onEndpoint: ({ endpoint }) => {
      found.push(routeTemplate(endpoint.method, endpoint.path))
    }
  })
  for (const template of ["/metrics", "/openapi.json", "/docs"]) found.push(routeTemplate("GET", template))
  return found
})()

/** Whether `path`'s segments are the template's, a trailing `/` allowed. */
const matches = (route: RouteTemplate, path: ReadonlyArray<string>): boolean => {
  const count = route.segments.length
  if (path.length !== count && !(path.length === count + 1 && path[count] === "")) return false
  for (let i = 0; i < count; i++) {
    const literal = route.segments[i]
    const segment = path[i] ?? ""
    if (literal === undefined ? segment === "" : segment !== literal) return false
  }
  return true
}

/**
 * The route template of a request, bounded to the API's own routes: the first route of the
 * method at that path, else the first at that path. One pass over the routes, no pattern built.
 */
export const routeOf = (method: string, url: string): string => {
  const query = url.indexOf("?")
  const path = (query === -1 ? url : url.slice(0, query)).split("/")
  let firstAtPath: RouteTemplate | undefined
  for (const route of templates) {
    if (!matches(route, path)) continue
    if (route.method === method) return route.template
    firstAtPath ??= route
  }
  return firstAtPath?.template ?? "unmatched"
}

const methods = new Set(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])

export const httpMetrics = HttpMiddleware.make((app) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const started = yield* Clock.currentTimeMillis
    const method = methods.has(request.method) ? request.method : "OTHER"
    const route = routeOf(request.method, request.url)
    yield* HttpApp.appendPreResponseHandler((_request, response: HttpServerResponse.HttpServerResponse) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        observe(httpRequestDuration, { method, route, status: String(response.status) }, (now - started) / 1000)).pipe(
          Effect.as(response)
        )
    )
    return yield* app
  })
)
