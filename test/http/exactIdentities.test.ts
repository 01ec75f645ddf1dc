import { expect, layer } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { apiLayer, bodyAs, ErrorBody, flashcardBody, JobBody, PageBody, TestApi, tokenFor } from "./support/harness.js"
import { mysqlEngine } from "./support/mysqlEngine.js"

const timeout = { timeout: "60 seconds" } as const

const OpenApiResponses = Schema.Struct({
  paths: Schema.Record({
    key: Schema.String,
    value: Schema.Record({
      key: Schema.String,
      value: Schema.Struct({ responses: Schema.Record({ key: Schema.String, value: Schema.Unknown }) })
    })
  })
})

layer(apiLayer(mysqlEngine("http_identities")), { excludeTestServices: true, ...timeout })(
  "exact identities over HTTP on MySQL + Redis",
  (it) => {
    it.effect("victim1's job exists", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const created = yield* api.request("POST", "/api/ai/flashcard-generations", {
          token: yield* tokenFor("victim1"),
          body: flashcardBody(),
          headers: { "Idempotency-Key": "victim-key" }
        })
        expect(created.status).toBe(202)
      }))

    const refusedSubs: ReadonlyArray<readonly [string, string]> = [
      ["a trailing space", "victim1 "],
      ["a trailing newline", "victim1\n"],
      ["a newline that would forge a log line", "victim1\ntimestamp=2026-01-01T00:00:00Z level=INFO message=forged"],
      ["a leading space", " victim1"],
      ["a NUL", "victim1\u0000"],
      ["a letter outside ASCII", "vïctim1"],
      ["65 characters", "a".repeat(65)]
    ]
    for (const [label, sub] of refusedSubs) {
      it.effect(`a sub with ${label} is 401 on every route`, () =>
        Effect.gen(function*() {
          const api = yield* TestApi
          const token = yield* tokenFor(sub)
          const listed = yield* api.request("GET", "/api/ai/jobs", { token })
          expect(listed.status).toBe(401)
          expect((yield* bodyAs(ErrorBody)(listed)).code).toBe("UNAUTHORIZED")
          const repeated = yield* api.request("POST", "/api/ai/flashcard-generations", {
            token,
            body: flashcardBody(),
            headers: { "Idempotency-Key": "victim-key" }
          })
          expect(repeated.status).toBe(401)
          const revoked = yield* api.request("DELETE", "/api/ai/credentials/deepseek", { token })
          expect(revoked.status).toBe(401)
        }))
    }

    it.effect("every character the pattern allows, 64 of them, is a valid user", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const token = yield* tokenFor("Az09._:@-".repeat(8).slice(0, 64))
        const page = yield* api.request("GET", "/api/ai/jobs", { token })
        expect(page.status).toBe(200)
        expect((yield* bodyAs(PageBody)(page)).items).toEqual([])
      }))

    it.effect("Idempotency-Key reused with another body is 409 IDEMPOTENCY_KEY_REUSED; the same body is 200 with the job", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const token = yield* tokenFor("idem-user")
        const send = (body: Readonly<Record<string, unknown>>) =>
          api.request("POST", "/api/ai/flashcard-generations", {
            token,
            body,
            headers: { "Idempotency-Key": "reused-key" }
          })

        const first = yield* send(flashcardBody({ sourceText: "The first source text, about the water cycle." }))
        expect(first.status).toBe(202)
        const job = yield* bodyAs(JobBody)(first)

        const same = yield* send(flashcardBody({ sourceText: "The first source text, about the water cycle." }))
        expect(same.status).toBe(200)
        expect((yield* bodyAs(JobBody)(same)).jobId).toBe(job.jobId)

        const otherText = "A different source text, about plate tectonics."
        const other = yield* send(flashcardBody({ sourceText: otherText }))
        expect(other.status).toBe(409)
        const error = yield* bodyAs(ErrorBody)(other)
        expect(error.code).toBe("IDEMPOTENCY_KEY_REUSED")
        expect(error.message).not.toContain(otherText)
        expect(error.message).not.toContain("reused-key")

        const otherCount = yield* send(
          flashcardBody({ sourceText: "The first source text, about the water cycle.", count: 5 })
        )
        expect(otherCount.status).toBe(409)

        const listed = yield* bodyAs(PageBody)(yield* api.request("GET", "/api/ai/jobs", { token }))
        expect(listed.items.map((item) => item.jobId)).toEqual([job.jobId])
      }))

    it.effect("OpenAPI documents the 409 on both creation routes", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const spec = yield* bodyAs(OpenApiResponses)(yield* api.request("GET", "/openapi.json"))
        for (const path of ["/api/ai/flashcard-generations", "/api/ai/feynman-evaluations"]) {
          expect(Object.keys(spec.paths[path]?.["post"]?.responses ?? {}), path).toContain("409")
          expect(JSON.stringify(spec.paths[path]?.["post"]?.responses["409"])).toContain("IdempotencyKeyReused")
        }
      }))
  }
)
