import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { bodyAs, frozenKeys, JobBody, memoryEngine, startApi, tokenFor } from "./support/harness.js"

/** Just enough of OpenAPI 3.1 to walk it in a test. */
const JsonSchema: Schema.Schema<JsonSchema> = Schema.suspend(() =>
  Schema.Struct({
    $ref: Schema.optional(Schema.String),
    type: Schema.optional(Schema.String),
    required: Schema.optional(Schema.Array(Schema.String)),
    properties: Schema.optional(Schema.Record({ key: Schema.String, value: JsonSchema })),
    anyOf: Schema.optional(Schema.Array(JsonSchema)),
    enum: Schema.optional(Schema.Array(Schema.Unknown)),
    minLength: Schema.optional(Schema.Number),
    minimum: Schema.optional(Schema.Number),
    items: Schema.optional(JsonSchema),
    minItems: Schema.optional(Schema.Number)
  })
)
interface JsonSchema {
  readonly $ref?: string | undefined
  readonly type?: string | undefined
  readonly required?: ReadonlyArray<string> | undefined
  readonly properties?: { readonly [key: string]: JsonSchema } | undefined
  readonly anyOf?: ReadonlyArray<JsonSchema> | undefined
  readonly enum?: ReadonlyArray<unknown> | undefined
  readonly minLength?: number | undefined
  readonly minimum?: number | undefined
  readonly items?: JsonSchema | undefined
  readonly minItems?: number | undefined
}

const Content = Schema.Struct({ "application/json": Schema.optional(Schema.Struct({ schema: JsonSchema })) })
const Operation = Schema.Struct({
  operationId: Schema.String,
  parameters: Schema.Array(Schema.Struct({ name: Schema.String, in: Schema.String, required: Schema.Boolean })),
  security: Schema.Array(Schema.Record({ key: Schema.String, value: Schema.Array(Schema.String) })),
  requestBody: Schema.optional(Schema.Struct({ content: Content })),
  responses: Schema.Record({
    key: Schema.String,
    value: Schema.Struct({ description: Schema.String, content: Schema.optional(Content) })
  })
})
type Operation = typeof Operation.Type
const Spec = Schema.Struct({
  openapi: Schema.String,
  paths: Schema.Record({ key: Schema.String, value: Schema.Record({ key: Schema.String, value: Operation }) }),
  components: Schema.Struct({
    schemas: Schema.Record({ key: Schema.String, value: JsonSchema }),
    securitySchemes: Schema.Record({ key: Schema.String, value: Schema.Unknown })
  })
})
type Spec = typeof Spec.Type

/** The route table: method, OpenAPI path, security, and the error codes by status. */
const table: ReadonlyArray<{
  readonly method: string
  readonly path: string
  readonly security: "bearer" | "runtimeServiceToken" | "none"
  readonly success: string
  readonly errors: Readonly<Record<string, ReadonlyArray<string>>>
}> = [
  {
    method: "post",
    path: "/api/ai/flashcard-generations",
    security: "bearer",
    success: "202",
    errors: {
      "400": ["INVALID_REQUEST"],
      "401": ["UNAUTHORIZED"],
      "429": ["TOO_MANY_JOBS", "QUOTA_EXCEEDED"],
      "503": ["PLATFORM_UNAVAILABLE"]
    }
  },
  {
    method: "post",
    path: "/api/ai/feynman-evaluations",
    security: "bearer",
    success: "202",
    errors: {
      "400": ["INVALID_REQUEST"],
      "401": ["UNAUTHORIZED"],
      "429": ["TOO_MANY_JOBS", "QUOTA_EXCEEDED"],
      "503": ["PLATFORM_UNAVAILABLE"]
    }
  },
  {
    method: "post",
    path: "/api/ai/learning-analyses",
    security: "bearer",
    success: "202",
    errors: {
      "400": ["INVALID_REQUEST"],
      "401": ["UNAUTHORIZED"],
      "429": ["TOO_MANY_JOBS", "QUOTA_EXCEEDED"],
      "503": ["PLATFORM_UNAVAILABLE"]
    }
  },
  {
    method: "post",
    path: "/api/ai/flashcard-generations/batch",
    security: "bearer",
    success: "202",
    errors: {
      "400": ["INVALID_REQUEST"],
      "401": ["UNAUTHORIZED"],
      "429": ["TOO_MANY_JOBS", "QUOTA_EXCEEDED"],
      "503": ["PLATFORM_UNAVAILABLE"]
    }
  },
  {
    method: "post",
    path: "/api/ai/feynman-evaluations/batch",
    security: "bearer",
    success: "202",
    errors: {
      "400": ["INVALID_REQUEST"],
      "401": ["UNAUTHORIZED"],
      "429": ["TOO_MANY_JOBS", "QUOTA_EXCEEDED"],
      "503": ["PLATFORM_UNAVAILABLE"]
    }
  },
  {
    method: "post",
    path: "/api/ai/learning-analyses/batch",
    security: "bearer",
    success: "202",
    errors: {
      "400": ["INVALID_REQUEST"],
      "401": ["UNAUTHORIZED"],
      "429": ["TOO_MANY_JOBS", "QUOTA_EXCEEDED"],
      "503": ["PLATFORM_UNAVAILABLE"]
    }
  },
  {
    method: "get",
    path: "/api/ai/jobs/{jobId}",
    security: "bearer",
    success: "200",
    errors: { "401": ["UNAUTHORIZED"], "404": ["JOB_NOT_FOUND"], "503": ["PLATFORM_UNAVAILABLE"] }
  },
  {
    method: "get",
    path: "/api/ai/jobs",
    security: "bearer",
    success: "200",
    errors: { "400": ["INVALID_REQUEST"], "401": ["UNAUTHORIZED"] }
  },
  {
    method: "get",
    path: "/api/ai/jobs/{jobId}/events",
    security: "bearer",
    success: "200",
    errors: { "401": ["UNAUTHORIZED"], "404": ["JOB_NOT_FOUND"] }
  },
  {
    method: "get",
    path: "/api/ai/jobs/{jobId}/artifacts",
    security: "bearer",
    success: "200",
    errors: { "401": ["UNAUTHORIZED"], "404": ["JOB_NOT_FOUND"] }
  },
  {
    method: "post",
    path: "/api/ai/jobs/{jobId}/cancel",
    security: "bearer",
    success: "200",
    errors: {
      "401": ["UNAUTHORIZED"],
      "404": ["JOB_NOT_FOUND"],
      "409": ["JOB_NOT_CANCELLABLE", "JOB_ALREADY_CANCELLED"]
    }
  },
  {
    method: "put",
    path: "/api/ai/credentials/deepseek",
    security: "bearer",
    success: "200",
    errors: { "400": ["INVALID_REQUEST"], "401": ["UNAUTHORIZED"] }
  },
  {
    method: "delete",
    path: "/api/ai/credentials/deepseek",
    security: "bearer",
    success: "204",
    errors: { "401": ["UNAUTHORIZED"], "404": ["CREDENTIAL_NOT_FOUND"] }
  },
  {
    method: "get",
    path: "/admin-api/ai/jobs",
    security: "bearer",
    success: "200",
    errors: { "400": ["INVALID_REQUEST"], "401": ["UNAUTHORIZED"], "403": ["FORBIDDEN"] }
  },
  {
    method: "get",
    path: "/admin-api/ai/jobs/{jobId}",
    security: "bearer",
    success: "200",
    errors: { "401": ["UNAUTHORIZED"], "403": ["FORBIDDEN"], "404": ["JOB_NOT_FOUND"] }
  },
  {
    method: "post",
    path: "/admin-api/ai/jobs/{jobId}/retry",
    security: "bearer",
    success: "201",
    errors: { "401": ["UNAUTHORIZED"], "403": ["FORBIDDEN"], "404": ["JOB_NOT_FOUND"], "409": ["JOB_NOT_RETRYABLE"] }
  },
  {
    method: "get",
    path: "/admin-api/ai/outbox",
    security: "bearer",
    success: "200",
    errors: { "401": ["UNAUTHORIZED"], "403": ["FORBIDDEN"] }
  },
  {
    method: "post",
    path: "/admin-api/ai/outbox/{eventId}/replay",
    security: "bearer",
    success: "200",
    errors: {
      "401": ["UNAUTHORIZED"],
      "403": ["FORBIDDEN"],
      "404": ["OUTBOX_EVENT_NOT_FOUND"],
      "409": ["OUTBOX_EVENT_NOT_DEAD"]
    }
  },
  {
    method: "get",
    path: "/admin-api/ai/workers",
    security: "bearer",
    success: "200",
    errors: { "401": ["UNAUTHORIZED"], "403": ["FORBIDDEN"] }
  },
  {
    method: "get",
    path: "/admin-api/ai/outbox/events",
    security: "bearer",
    success: "200",
    errors: { "400": ["INVALID_REQUEST"], "401": ["UNAUTHORIZED"], "403": ["FORBIDDEN"] }
  },
  {
    method: "post",
    path: "/admin-api/ai/outbox/replay-dead",
    security: "bearer",
    success: "200",
    errors: { "401": ["UNAUTHORIZED"], "403": ["FORBIDDEN"] }
  },
  {
    method: "get",
    path: "/admin-api/ai/jobs/{jobId}/timeline",
    security: "bearer",
    success: "200",
    errors: { "401": ["UNAUTHORIZED"], "403": ["FORBIDDEN"], "404": ["JOB_NOT_FOUND"] }
  },
  {
    method: "get",
    path: "/admin-api/ai/stats",
    security: "bearer",
    success: "200",
    errors: { "401": ["UNAUTHORIZED"], "403": ["FORBIDDEN"] }
  },
  {
    method: "post",
    path: "/internal/credentials/{credentialId}/resolve",
    security: "runtimeServiceToken",
    success: "200",
    errors: { "401": ["UNAUTHORIZED"], "404": ["CREDENTIAL_NOT_FOUND"] }
  },
  { method: "get", path: "/healthz", security: "none", success: "200", errors: {} },
  { method: "get", path: "/readyz", security: "none", success: "200", errors: { "503": ["PLATFORM_UNAVAILABLE"] } }
]

/** The pages served beside the API, described too: method, path, security, success status. */
const pages: ReadonlyArray<{ readonly method: string; readonly path: string; readonly security: "bearer" | "none" }> = [
  { method: "get", path: "/openapi.json", security: "none" },
  { method: "get", path: "/docs", security: "none" },
  { method: "get", path: "/admin", security: "none" },
  { method: "get", path: "/admin/console.js", security: "none" },
  { method: "get", path: "/metrics", security: "bearer" }
]

const resolveRef = (spec: Spec, schema: JsonSchema): JsonSchema => {
  if (schema.$ref === undefined) return schema
  const name = schema.$ref.replace("#/components/schemas/", "")
  const target = spec.components.schemas[name]
  if (target === undefined) throw new Error(`dangling $ref ${schema.$ref}`)
  return resolveRef(spec, { ...target, ...schema, $ref: undefined })
}

/** The codes an error response declares (`code` enums of the schemas it references). */
const codesOf = (spec: Spec, schema: JsonSchema | undefined): ReadonlyArray<string> => {
  if (schema === undefined) return []
  const resolved = resolveRef(spec, schema)
  if (resolved.anyOf !== undefined) return resolved.anyOf.flatMap((s) => codesOf(spec, s))
  const code = resolved.properties?.["code"]
  return code?.enum?.filter((v): v is string => typeof v === "string") ?? []
}

/** A value satisfying `schema`: the minimum of every required field. */
const exampleOf = (spec: Spec, schema: JsonSchema): unknown => {
  const resolved = resolveRef(spec, schema)
  switch (resolved.type) {
    case "object": {
      const out: Record<string, unknown> = {}
      for (const key of resolved.required ?? []) {
        const property = resolved.properties?.[key]
        if (property !== undefined) out[key] = exampleOf(spec, property)
      }
      return out
    }
    case "string":
      return resolved.enum?.[0] ?? "x".repeat(Math.max(1, resolved.minLength ?? 1))
    case "integer":
    case "number":
      return resolved.minimum ?? 1
    case "array": {
      const items = resolved.items
      if (items === undefined) throw new Error(`no example for ${JSON.stringify(resolved)}`)
      return Array.from({ length: resolved.minItems ?? 0 }, () => exampleOf(spec, items))
    }
    default:
      throw new Error(`no example for ${JSON.stringify(resolved)}`)
  }
}

const allRefs = (value: unknown): ReadonlyArray<string> => {
  if (Array.isArray(value)) return value.flatMap(allRefs)
  if (typeof value !== "object" || value === null) return []
  return Object.entries(value).flatMap((
    [key, child]
  ) => (key === "$ref" && typeof child === "string" ? [child] : allRefs(child)))
}

describe("OpenAPI", () => {
  it.live("/openapi.json describes every route with its schemas, security and error codes", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine())
        const response = yield* api.request("GET", "/openapi.json")
        expect(response.status).toBe(200)
        const spec = yield* bodyAs(Spec)(response)
        expect(spec.openapi).toMatch(/^3\./)
        expect(Object.keys(spec.components.securitySchemes).sort()).toEqual(["bearer", "runtimeServiceToken"])

        const documented = Object.entries(spec.paths).flatMap(([path, item]) =>
          Object.keys(item).map((m) => `${m} ${path}`)
        )
        expect(documented.sort()).toEqual([...table, ...pages].map((r) => `${r.method} ${r.path}`).sort())
        for (const route of pages) {
          const operation = spec.paths[route.path]?.[route.method]
          expect(operation?.responses["200"], route.path).toBeDefined()
          expect(operation?.security.flatMap((s) => Object.keys(s)), route.path).toEqual(
            route.security === "none" ? [] : [route.security]
          )
        }

        for (const route of table) {
          const operation: Operation | undefined = spec.paths[route.path]?.[route.method]
          if (operation === undefined) throw new Error(`${route.method} ${route.path} missing`)
          const where = `${route.method} ${route.path}`
          expect(Object.keys(operation.responses), where).toContain(route.success)
          const securityNames = operation.security.flatMap((s) => Object.keys(s))
          expect(securityNames, where).toEqual(route.security === "none" ? [] : [route.security])
          for (const [status, codes] of Object.entries(route.errors)) {
            const declared = codesOf(spec, operation.responses[status]?.content?.["application/json"]?.schema)
            expect(Array.from(new Set(declared)).sort(), `${where} ${status}`).toEqual([...codes].sort())
          }
          // Every route answers a bad request and an outage in the same { code, message } shape.
          expect(codesOf(spec, operation.responses["400"]?.content?.["application/json"]?.schema), where).toEqual([
            "INVALID_REQUEST"
          ])
          expect(codesOf(spec, operation.responses["503"]?.content?.["application/json"]?.schema), where).toContain(
            "PLATFORM_UNAVAILABLE"
          )
          for (const parameter of operation.parameters.filter((p) => p.in === "path")) {
            expect(route.path, where).toContain(`{${parameter.name}}`)
            expect(parameter.required).toBe(true)
          }
        }
        expect(spec.paths["/api/ai/flashcard-generations"]?.["post"]?.parameters.map((p) => p.name)).toContain(
          "idempotency-key"
        )
        expect(Object.keys(spec.components.schemas)).not.toContain("HttpApiDecodeError")
        for (const ref of allRefs(spec)) {
          expect(spec.components.schemas[ref.replace("#/components/schemas/", "")], ref).toBeDefined()
        }
        // The frozen JobStatusResponse (docs/architecture.md §15.2), field for field.
        const status = spec.components.schemas["JobStatusResponse"]
        expect(Object.keys(status?.properties ?? {}).sort()).toEqual([...frozenKeys].sort())
        expect([...(status?.required ?? [])].sort()).toEqual(
          ["jobId", "jobType", "lifecycleStatus", "queueName", "priority", "progress", "createdAt"].sort()
        )
        expect(Object.keys(spec.components.schemas["AdminJobStatusResponse"]?.properties ?? {})).toContain(
          "internalErrorMessage"
        )
      })
    ))

  it.live("requests built from the document succeed", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine())
        const spec = yield* bodyAs(Spec)(yield* api.request("GET", "/openapi.json"))
        const token = yield* tokenFor("user-a")
        const built = (path: string, method: string, params: Readonly<Record<string, string>> = {}) => {
          const operation = spec.paths[path]?.[method]
          if (operation === undefined) throw new Error(`${method} ${path} missing`)
          const schema = operation.requestBody?.content["application/json"]?.schema
          const url = path.replace(/\{(\w+)\}/g, (_, name: string) => params[name] ?? "")
          return api.request(method.toUpperCase(), url, {
            token,
            body: schema === undefined ? undefined : exampleOf(spec, schema)
          })
        }
        for (
          const path of ["/api/ai/flashcard-generations", "/api/ai/feynman-evaluations", "/api/ai/learning-analyses"]
        ) {
          const created = yield* built(path, "post")
          expect(created.status, created.text).toBe(202)
        }
        const created = yield* bodyAs(JobBody)(yield* built("/api/ai/flashcard-generations", "post"))
        expect((yield* built("/api/ai/jobs/{jobId}", "get", { jobId: created.jobId })).status).toBe(200)
        expect((yield* built("/api/ai/jobs", "get")).status).toBe(200)
        expect((yield* built("/api/ai/credentials/deepseek", "put")).status).toBe(200)
        expect((yield* built("/api/ai/jobs/{jobId}/cancel", "post", { jobId: created.jobId })).status).toBe(200)
      })
    ))

  it.live("/docs serves the Swagger UI", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine())
        const docs = yield* api.request("GET", "/docs")
        expect(docs.status).toBe(200)
        expect(docs.headers.get("content-type")).toContain("text/html")
        expect(docs.text.toLowerCase()).toContain("swagger")
      })
    ))
})
