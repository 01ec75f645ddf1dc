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
  readonly pattern: RegExp
}

const toPattern = (template: string) =>
  new RegExp(
    `^${
      template.split("/").map((part) => (part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
        .join("/")
    }/?$`
  )

const templates: ReadonlyArray<RouteTemplate> = (() => {
  const found: Array<RouteTemplate> = []
  HttpApi.reflect(AiJobApi, {
    onGroup: () => undefined,
    onEndpoint: ({ endpoint }) => {
      found.push({ method: endpoint.method, template: endpoint.path, pattern: toPattern(endpoint.path) })
    }
  })
  for (const template of ["/metrics", "/openapi.json", "/docs"]) {
    found.push({ method: "GET", template, pattern: toPattern(template) })
  }
  return found
})()

/** The route template of a request, bounded to the API's own routes. */
export const routeOf = (method: string, url: string): string => {
  const path = url.split("?")[0] ?? url
  const byPath = templates.filter((route) => route.pattern.test(path))
  return (byPath.find((route) => route.method === method) ?? byPath[0])?.template ?? "unmatched"
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
