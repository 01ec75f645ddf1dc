import { SqlClient } from "@effect/sql"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Exit, Layer, Schema } from "effect"
import { ReadinessProbeLive } from "../../src/main/AppLayers.js"
import { deadRedisLayer, uniqueRedisPrefix } from "../support/redis.js"
import {
  apiLayer,
  bodyAs,
  ErrorBody,
  feynmanBody,
  flashcardBody,
  JobBody,
  learningAnalysisBody,
  markFailed,
  markSucceeded,
  memoryEngine,
  startApi,
  TestApi,
  tokenFor,
  validatedAgainstOwnDocument
} from "./support/harness.js"
import { mysqlEngine } from "./support/mysqlEngine.js"
import { describedParameter, responseValidatorFor } from "./support/openApiValidation.js"

/**
 * The engine against its own `/openapi.json`: what the description accepts, the engine accepts;
 * what it refuses, the engine refuses; every answer, routed or not, is one the description has.
 * (Every answer of every HTTP suite is also checked by the harness: `support/openApiValidation.ts`.)
 */

const emoji = "\u{1F600}"
const servedDocument = Effect.map(TestApi, (api) => api.request("GET", "/openapi.json")).pipe(
  Effect.flatten,
  Effect.map((response) => response.text)
)

layer(apiLayer(memoryEngine()))("the engine against its description (memory stack)", (it) => {
  it.effect("lengths are characters (code points), as JSON Schema counts them, in bodies and paths", () =>
    Effect.gen(function*() {
      const api = yield* TestApi
      const token = yield* tokenFor("length-user")
      // maxLength 255 and 36: 255 emoji are 510 UTF-16 units, and were refused.
      const concept = yield* api.request("POST", "/api/ai/feynman-evaluations", {
        token,
        body: feynmanBody({ concept: emoji.repeat(255) })
      })
      expect(concept.status, concept.text).toBe(202)
      const tooLong = yield* api.request("POST", "/api/ai/feynman-evaluations", {
        token,
        body: feynmanBody({ concept: emoji.repeat(256) })
      })
      expect(tooLong.status).toBe(400)
      expect(yield* bodyAs(ErrorBody)(tooLong)).toEqual({
        code: "INVALID_REQUEST",
        message: "concept: at most 255 characters"
      })
      const evaluation = {
        evaluationId: emoji.repeat(36),
        concept: emoji.repeat(255),
        score: 50,
        gaps: [emoji.repeat(1_000)]
      }
      const analysis = yield* api.request("POST", "/api/ai/learning-analyses", {
        token,
        body: { evaluations: [evaluation] }
      })
      expect(analysis.status, analysis.text).toBe(202)
      // A path parameter of 64 characters is a job id the engine looks for (maxLength 64), not a 400.
      const path = yield* api.request("GET", `/api/ai/jobs/${encodeURIComponent(emoji.repeat(64))}`, { token })
      expect(path.status, path.text).toBe(404)
      expect(path.body).toMatchObject({ code: "JOB_NOT_FOUND" })
      const pathTooLong = yield* api.request("GET", `/api/ai/jobs/${encodeURIComponent(emoji.repeat(65))}`, { token })
      expect(pathTooLong.status).toBe(400)
    }))

  it.effect("too many evaluations is 400 naming the count, not the type", () =>
    Effect.gen(function*() {
      const api = yield* TestApi
      const token = yield* tokenFor("count-user")
      const [one] = learningAnalysisBody().evaluations
      const many = yield* api.request("POST", "/api/ai/learning-analyses", {
        token,
        body: { evaluations: Array.from({ length: 21 }, () => one) }
      })
      expect(yield* bodyAs(ErrorBody)(many)).toEqual({
        code: "INVALID_REQUEST",
        message: "evaluations: must have at most 20 items"
      })
      const none = yield* api.request("POST", "/api/ai/learning-analyses", { token, body: { evaluations: [] } })
      expect(yield* bodyAs(ErrorBody)(none)).toEqual({
        code: "INVALID_REQUEST",
        message: "evaluations: must not be empty"
      })
    }))

  it.effect("query parameters: a value the description accepts is accepted, one it refuses is 400", () =>
    Effect.gen(function*() {
      const api = yield* TestApi
      const document = yield* servedDocument
      const admin = yield* tokenFor("params-admin", "SUPER_ADMIN")
      const cases: ReadonlyArray<readonly [path: string, url: string, name: string, values: ReadonlyArray<string>]> = [
        ["/api/ai/jobs", "/api/ai/jobs", "limit", ["0", "1", "100", "101", "abc", "5.5", "-1", "1e1", ""]],
        ["/admin-api/ai/jobs", "/admin-api/ai/jobs", "limit", ["0", "20", "1000"]],
        ["/api/ai/jobs/{jobId}", "/api/ai/jobs/some-job", "timeoutMs", [
          "0",
          "250",
          "abc",
          "-1",
          "2.5",
          "999999",
          "1e300"
        ]],
        ["/admin-api/ai/jobs", "/admin-api/ai/jobs", "createdFrom", [
          "2024-05-01T12:00:00Z",
          "2024-05-01t12:00:00.123456789-05:30",
          "2024-05-01T12:00:00+02:00",
          "2024-05-01",
          "1000-01-01T00:00:00+01:00",
          "9999-12-31T23:59:59-05:00",
          "yesterday",
          "0999-12-31T23:59:59Z",
          "2024-02-30T00:00:00Z",
          "2023-02-29",
          "2024-05-01T24:00:00Z",
          "2024-05-01T12:00:00"
        ]],
        ["/admin-api/ai/jobs", "/admin-api/ai/jobs", "createdTo", [
          "2024-02-29T23:59:59.999Z",
          "+275760-09-13T00:00:00.000Z"
        ]]
      ]
      for (const [path, url, name, values] of cases) {
        const described = describedParameter(document, path, "get", name)
        for (const value of values) {
          const answer = yield* api.request("GET", `${url}?${name}=${encodeURIComponent(value)}`, { token: admin })
          const where = `${name}=${JSON.stringify(value)} (${answer.status} ${answer.text.slice(0, 120)})`
          expect(answer.status === 400, where).toBe(!described(value))
        }
      }
      // The rules are in the parameters' schemas, not in prose.
      expect(described(document, "/api/ai/jobs", "limit", ["0", "101"])).toEqual([false, false])
    }))

  it.effect("a request no route takes: 404 ROUTE_NOT_FOUND, or 405 METHOD_NOT_ALLOWED with Allow, as JSON", () =>
    Effect.gen(function*() {
      const api = yield* TestApi
      const token = yield* tokenFor("route-user")
      for (
        const [method, path] of [["POST", "/api/ai/jobs//cancel"], ["GET", "/api/ai/jobs//cancel"], [
          "GET",
          "/no/such/route"
        ]] as const
      ) {
        const answer = yield* api.request(method, path, { token })
        expect(answer.status, `${method} ${path}`).toBe(404)
        expect(answer.headers.get("content-type")).toBe("application/json")
        expect(yield* bodyAs(ErrorBody)(answer)).toEqual({
          code: "ROUTE_NOT_FOUND",
          message: "No route has this path. /openapi.json lists the routes."
        })
      }
      const allowed: ReadonlyArray<readonly [string, string, string]> = [
        ["DELETE", "/healthz", "GET, HEAD"],
        ["PUT", "/api/ai/jobs/some-job/cancel", "POST"],
        ["PATCH", "/api/ai/credentials/deepseek", "PUT, DELETE"],
        ["POST", "/admin", "GET, HEAD"]
      ]
      for (const [method, path, allow] of allowed) {
        const answer = yield* api.request(method, path, { token })
        expect(answer.status, `${method} ${path}`).toBe(405)
        expect(answer.headers.get("allow")).toBe(allow)
        expect(yield* bodyAs(ErrorBody)(answer)).toMatchObject({ code: "METHOD_NOT_ALLOWED" })
      }
      // HEAD is served wherever GET is.
      expect((yield* api.request("HEAD", "/healthz")).status).toBe(200)
    }))

  it.effect("a route that takes no body: none or {} passes, a field is 400 and changes nothing", () =>
    Effect.gen(function*() {
      const api = yield* TestApi
      const token = yield* tokenFor("body-user")
      const job = yield* bodyAs(JobBody)(
        yield* api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() })
      )
      const refused = yield* api.request("POST", `/api/ai/jobs/${job.jobId}/cancel`, {
        token,
        body: { reason: "changed my mind" }
      })
      expect(refused.status).toBe(400)
      expect(yield* bodyAs(ErrorBody)(refused)).toEqual({
        code: "INVALID_REQUEST",
        message: "body: this route takes no fields; send no body, or {}"
      })
      expect(refused.text).not.toContain("changed my mind")
      expect(
        (yield* bodyAs(JobBody)(yield* api.request("GET", `/api/ai/jobs/${job.jobId}`, { token }))).lifecycleStatus
      ).toBe("queued")
      const cancelled = yield* api.request("POST", `/api/ai/jobs/${job.jobId}/cancel`, { token, body: {} })
      expect(cancelled.status, cancelled.text).toBe(200)
      const spec = yield* servedDocument
      expect(JSON.parse(spec).paths["/api/ai/jobs/{jobId}/cancel"].post.requestBody).toMatchObject({
        required: false,
        content: { "application/json": { schema: { type: "object", maxProperties: 0 } } }
      })
    }))

  it.effect("a created job's answer says where it lives (Location), on 202 and on an operator's 201", () =>
    Effect.gen(function*() {
      const api = yield* TestApi
      const token = yield* tokenFor("location-user")
      const admin = yield* tokenFor("location-admin", "SUPER_ADMIN")
      const created = yield* api.request("POST", "/api/ai/flashcard-generations", {
        token,
        body: flashcardBody(),
        headers: { "idempotency-key": "loc-1" }
      })
      const job = yield* bodyAs(JobBody)(created)
      expect(created.headers.get("location")).toBe(`/api/ai/jobs/${job.jobId}`)
      expect((yield* api.request("GET", created.headers.get("location") ?? "", { token })).status).toBe(200)
      const repeated = yield* api.request("POST", "/api/ai/flashcard-generations", {
        token,
        body: flashcardBody(),
        headers: { "idempotency-key": "loc-1" }
      })
      expect(repeated.status).toBe(200)
      expect(repeated.headers.get("location")).toBeNull()
      yield* markFailed(job.jobId, {
        errorCode: "PROVIDER_UNAVAILABLE",
        publicErrorMessage: "x",
        internalErrorMessage: "y"
      })
      const retried = yield* api.request("POST", `/admin-api/ai/jobs/${job.jobId}/retry`, { token: admin })
      expect(retried.status).toBe(201)
      const retry = yield* bodyAs(JobBody)(retried)
      expect(retried.headers.get("location")).toBe(`/admin-api/ai/jobs/${retry.jobId}`)
    }))

  it.effect("the pages beside the API are described and answer as described", () =>
    Effect.gen(function*() {
      const api = yield* TestApi
      const admin = yield* tokenFor("pages-admin", "SUPER_ADMIN")
      const paths = Object.keys(JSON.parse(yield* servedDocument).paths)
      for (
        const [path, type] of [
          ["/openapi.json", "application/json"],
          ["/docs", "text/html"],
          ["/admin", "text/html"],
          ["/admin/console.js", "text/javascript"],
          ["/metrics", "text/plain"]
        ] as const
      ) {
        expect(paths).toContain(path)
        const answer = yield* api.request("GET", path, { token: admin })
        expect(answer.status, path).toBe(200)
        expect(answer.headers.get("content-type"), path).toContain(type)
      }
      const anonymous = yield* api.request("GET", "/metrics")
      expect(anonymous.status).toBe(401)
      expect(anonymous.headers.get("www-authenticate")).toContain("Bearer")
    }))
})

/** `describedParameter` for several values at once. */
const described = (document: string, path: string, name: string, values: ReadonlyArray<string>) =>
  values.map(describedParameter(document, path, "get", name))

describe("the response check itself", () => {
  it.live("an answer the description does not have fails the suite that received it", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Effect.scoped(Effect.gen(function*() {
        const api = yield* startApi(memoryEngine())
        const check = yield* validatedAgainstOwnDocument
        yield* check.start(api.baseUrl)
        check.onExchange({
          method: "GET",
          url: "/api/ai/jobs/j-1",
          requestHeaders: {},
          status: 418,
          headers: { "content-type": "application/json" },
          body: Buffer.from("{}")
        })
      })))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(String(Exit.isFailure(exit) ? exit.cause : "")).toContain(
        "GET /api/ai/jobs/j-1 → 418: status 418 is not declared"
      )
    }))

  it.live("each kind of mismatch is named", () =>
    Effect.scoped(Effect.gen(function*() {
      const api = yield* startApi(memoryEngine())
      const validator = responseValidatorFor((yield* api.request("GET", "/openapi.json")).text)
      const json = { "content-type": "application/json" }
      const problems = (exchange: Partial<Parameters<typeof validator.check>[0]>) =>
        validator.check({
          method: "GET",
          url: "/healthz",
          requestHeaders: {},
          status: 200,
          headers: json,
          body: Buffer.from("{\"status\":\"ok\"}"),
          ...exchange
        })
      expect(problems({})).toEqual([])
      expect(problems({ body: Buffer.from("{\"status\":\"fine\"}") }).join()).toContain("body:")
      expect(problems({ headers: { "content-type": "text/plain" } }).join()).toContain("content type text/plain")
      expect(problems({ url: "/nowhere", status: 404, headers: {}, body: Buffer.from("") }).join()).toContain(
        "no content type"
      )
      expect(
        problems({
          method: "DELETE",
          status: 405,
          headers: { ...json, allow: "GET" },
          body: Buffer.from(JSON.stringify({ code: "METHOD_NOT_ALLOWED", message: "m" }))
        }).join()
      )
        .toContain("Allow: GET; the document has GET, HEAD")
      expect(
        problems({
          method: "POST",
          url: "/api/ai/flashcard-generations",
          status: 202,
          body: Buffer.from(JSON.stringify({ jobId: "j" }))
        }).join()
      )
        .toContain("header Location is required and missing")
      expect(
        problems({
          method: "DELETE",
          url: "/api/ai/credentials/deepseek",
          status: 204,
          headers: {},
          body: Buffer.from("x")
        }).join()
      )
        .toContain("a body where the document declares none")
    })))
})

// ---------------------------------------------------------------------------------------------
// On MySQL + Redis

const Concept = Schema.Array(Schema.Struct({ concept: Schema.String }))

layer(apiLayer(mysqlEngine("http_conformance")), { excludeTestServices: true, timeout: "60 seconds" })(
  "the engine against its description (MySQL + Redis)",
  (it) => {
    it.effect("255 characters of emoji are stored whole, in the job and in the projected row", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const token = yield* tokenFor("mysql-length-user")
        const concept = emoji.repeat(255)
        const created = yield* api.request("POST", "/api/ai/feynman-evaluations", {
          token,
          body: feynmanBody({ concept })
        })
        expect(created.status, created.text).toBe(202)
        const job = yield* bodyAs(JobBody)(created)
        yield* markSucceeded(job.jobId, { score: 70, feedback: emoji.repeat(10_000), gaps: [emoji.repeat(1_000)] })
        const sql = yield* SqlClient.SqlClient
        const rows = yield* Schema.decodeUnknown(Concept)(
          yield* sql`SELECT concept FROM learning_evaluation WHERE job_id = ${job.jobId}`
        )
        expect(rows.map((row) => row.concept)).toEqual([concept])
      }))
  }
)

const deadRedisProbe = ReadinessProbeLive.pipe(
  Layer.provide(deadRedisLayer(uniqueRedisPrefix("http_conformance_dead")))
)

layer(apiLayer(mysqlEngine("http_conformance_dead"), { probe: deadRedisProbe }), {
  excludeTestServices: true,
  timeout: "60 seconds"
})(
  "a create refused while Redis is down (MySQL, Redis unreachable)",
  (it) => {
    it.effect("503 PLATFORM_UNAVAILABLE with Retry-After", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const token = yield* tokenFor("retry-after-user")
        const refused = yield* api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() })
        expect(refused.status).toBe(503)
        expect(refused.body).toMatchObject({ code: "PLATFORM_UNAVAILABLE" })
        expect(refused.headers.get("retry-after")).toBe("1")
      }))
  }
)
