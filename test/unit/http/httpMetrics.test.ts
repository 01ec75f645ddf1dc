import { HttpApi } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { AiJobApi } from "../../../src/http/Api.js"
import { routeOf } from "../../../src/http/httpMetrics.js"

/** The routes as patterns (a parameter is any non-empty segment, a trailing `/` allowed), as they were matched before. */
const routes: Array<{ readonly method: string; readonly template: string; readonly pattern: RegExp }> = []
const toPattern = (template: string) =>
  new RegExp(
    `^${
      template.split("/").map((part) => (part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
        .join("/")
    }/?$`
  )
HttpApi.reflect(AiJobApi, {
  onGroup: () => undefined,
  onEndpoint: ({ endpoint }) => {
    routes.push({ method: endpoint.method, template: endpoint.path, pattern: toPattern(endpoint.path) })
  }
})
for (const template of ["/metrics", "/openapi.json", "/docs"]) {
  routes.push({ method: "GET", template, pattern: toPattern(template) })
}
const byPatterns = (method: string, url: string): string => {
  const path = url.split("?")[0] ?? url
  const byPath = routes.filter((route) => route.pattern.test(path))
  return (byPath.find((route) => route.method === method) ?? byPath[0])?.template ?? "unmatched"
}

describe("the request metrics' route label", () => {
  it("is the template the route patterns pick, for every route and for paths no route takes", () => {
    const paths = routes.flatMap(({ template }) => {
      const filled = template.replace(/:[^/]+/g, "job_01JX")
      const emptied = template.replace(/:[^/]+/g, "")
      return [filled, `${filled}/`, `${filled}//`, `${filled}?a=1`, `${filled}/extra`, emptied, `${emptied}/`]
    })
    const odd = ["/", "//", "", "*", "/nope", "http://host/metrics", "/metrics?x", "/openapi.json/", "/openapiXjson"]
    for (const path of [...paths, ...odd]) {
      for (const method of ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "BREW"]) {
        expect(routeOf(method, path), `${method} ${path}`).toBe(byPatterns(method, path))
      }
    }
  })
})
