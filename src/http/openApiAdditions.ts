/**
 * What `/openapi.json` says beyond what `HttpApi` derives: the headers the server adds, the pages
 * served beside the API, the answers to unrouted requests and the optional empty body of routes
 * that take none. The HTTP tests check every answer they receive against the served document.
 */

type Json = Record<string, unknown>

const isRecord = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)

const text = { type: "string" } as const

const retryAfter = {
  description: "Seconds to wait before trying again (an outage expected to pass, a quota that resets).",
  required: false,
  schema: { type: "integer", minimum: 0 }
} as const

const wwwAuthenticate = {
  description: "The scheme to authenticate with (RFC 6750): `Bearer realm=\"...\"`.",
  required: true,
  schema: text
} as const

/** Headers every answer of a status carries (or may carry), whatever the route. */
const headersByStatus: Readonly<Record<string, Json>> = {
  "401": { "WWW-Authenticate": wwwAuthenticate },
  "429": { "Retry-After": retryAfter },
  "503": { "Retry-After": retryAfter }
}

/** A `Location` header naming the resource an answer created. */
export const locationHeader = (description: string) => ({
  Location: { description, required: true, schema: { type: "string", format: "uri-reference" } }
})

/** Endpoint transform: `headers` on the answer of `status`. */
export const withResponseHeaders = (status: number, headers: Json) => (operation: Record<string, unknown>) => {
  const responses = isRecord(operation["responses"]) ? operation["responses"] : {}
  const response = isRecord(responses[status]) ? responses[status] : { description: "Success" }
  const existing = isRecord(response["headers"]) ? response["headers"] : {}
  return { ...operation, responses: { ...responses, [status]: { ...response, headers: { ...existing, ...headers } } } }
}

/**
 * Endpoint transform for a route that takes no parameters in its body: no body, or an empty
 * JSON object (what many clients send with a POST), is accepted; anything else is 400.
 */
export const withOptionalEmptyBody = (operation: Record<string, unknown>) => ({
  ...operation,
  requestBody: {
    required: false,
    description: "None, or an empty JSON object.",
    content: { "application/json": { schema: { type: "object", maxProperties: 0 } } }
  }
})

const page = (operationId: string, summary: string, contentType: string, description: string) => ({
  get: {
    tags: [operationId.split(".")[0]],
    operationId,
    summary,
    parameters: [],
    security: [],
    responses: {
      "200": {
        description,
        content: { [contentType]: { schema: contentType === "application/json" ? { type: "object" } : text } }
      }
    }
  }
})

const errorRef = (name: string) => ({ "application/json": { schema: { $ref: `#/components/schemas/${name}` } } })

/** The routes served beside the HttpApi endpoints (`src/http/server.ts`). */
const servedPages = {
  "/openapi.json": page("docs.openApi", "This API description", "application/json", "The OpenAPI 3.1 document"),
  "/docs": page("docs.swaggerUi", "Swagger UI over this description", "text/html", "An HTML page"),
  "/admin": page(
    "console.page",
    "The operator console",
    "text/html",
    "An HTML page; it signs in with a SUPER_ADMIN token and uses the admin API only"
  ),
  "/admin/console.js": page("console.script", "The console's script", "text/javascript", "A JavaScript module"),
  "/metrics": {
    get: {
      tags: ["metrics"],
      operationId: "metrics.scrape",
      parameters: [],
      summary: "Prometheus metrics of this process",
      description: "Needs `Authorization: Bearer` with `METRICS_TOKEN` or a SUPER_ADMIN token.",
      security: [{ bearer: [] }],
      responses: {
        "200": { description: "Prometheus text format 0.0.4", content: { "text/plain": { schema: text } } },
        "401": { description: "No valid metrics or SUPER_ADMIN token", content: { "text/plain": { schema: text } } }
      }
    }
  }
}

/** What a request no route takes is answered (`src/http/unroutedRequests.ts`). */
const unroutedResponses = {
  RouteNotFound: {
    description: "Error codes: ROUTE_NOT_FOUND. No route has this path.",
    content: errorRef("RouteNotFound")
  },
  MethodNotAllowed: {
    description: "Error codes: METHOD_NOT_ALLOWED. The path takes other methods.",
    headers: { Allow: { description: "The methods this path takes.", required: true, schema: text } },
    content: errorRef("MethodNotAllowed")
  }
}

/** `headersByStatus` on each of an operation's answers. */
const withStatusHeaders = (operation: unknown): unknown => {
  if (!isRecord(operation) || !isRecord(operation["responses"])) return operation
  return Object.keys(operation["responses"]).reduce<Json>((current, status) => {
    const headers = headersByStatus[status]
    return headers === undefined ? current : withResponseHeaders(Number(status), headers)(current)
  }, operation)
}

const eachOperation = (paths: Json, f: (operation: unknown) => unknown): Json =>
  Object.fromEntries(
    Object.entries(paths).map(([path, item]) => [
      path,
      isRecord(item)
        ? Object.fromEntries(Object.entries(item).map(([method, operation]) => [method, f(operation)]))
        : item
    ])
  )

/** The API-wide additions, applied last to the whole document. */
export const withServerAdditions = (spec: Record<string, unknown>): Record<string, unknown> => {
  const components = isRecord(spec["components"]) ? spec["components"] : {}
  const paths = isRecord(spec["paths"]) ? spec["paths"] : {}
  const tags = Array.isArray(spec["tags"]) ? spec["tags"] : []
  return {
    ...spec,
    tags: [...tags, { name: "docs" }, { name: "console" }, { name: "metrics" }],
    paths: eachOperation({ ...paths, ...servedPages }, withStatusHeaders),
    components: {
      ...components,
      responses: { ...(isRecord(components["responses"]) ? components["responses"] : {}), ...unroutedResponses }
    }
  }
}
