import { describe, expect, it } from "@effect/vitest"
import { Effect, HashMap, Schema } from "effect"
import { MemoryDatabase } from "../../src/layers/memory/MemoryDatabase.js"
import { LogCapture, LogCaptureLayer } from "../support/logCapture.js"
import {
  bodyAs,
  ErrorBody,
  flashcardBody,
  JobBody,
  memoryEngine,
  runtimeToken,
  startApi,
  tokenFor
} from "./support/harness.js"

const Stored = Schema.Struct({
  credentialId: Schema.String,
  provider: Schema.String,
  keyVersion: Schema.Number,
  createdAt: Schema.String
})

const apiKey = "sk-live-abcdef0123456789SECRET"

const credentialRows = Effect.map(
  Effect.flatMap(MemoryDatabase, (db) => db.snapshot),
  (tables) => Array.from(HashMap.values(tables.userModelCredential))
)

describe("credentials", () => {
  it.live("PUT stores the key encrypted and never returns it; DELETE revokes it (then 404)", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine())
        const token = yield* tokenFor("user-a")
        const put = yield* api.request("PUT", "/api/ai/credentials/deepseek", { token, body: { apiKey } })
        expect(put.status).toBe(200)
        const stored = yield* bodyAs(Stored)(put)
        expect(stored).toMatchObject({ provider: "deepseek", keyVersion: 1 })
        expect(put.text).not.toContain(apiKey)
        expect(Object.keys(put.body ?? {}).sort()).toEqual(["createdAt", "credentialId", "keyVersion", "provider"])
        const rows = yield* api.run(credentialRows)
        expect(rows).toHaveLength(1)
        expect(JSON.stringify(rows)).not.toContain(apiKey)

        // A second PUT replaces the first.
        const replaced = yield* bodyAs(Stored)(
          yield* api.request("PUT", "/api/ai/credentials/deepseek", { token, body: { apiKey: `${apiKey}2` } })
        )
        const afterReplace = yield* api.run(credentialRows)
        expect(afterReplace.filter((r) => r.revokedAt === null).map((r) => r.id)).toEqual([replaced.credentialId])

        const deleted = yield* api.request("DELETE", "/api/ai/credentials/deepseek", { token })
        expect(deleted.status).toBe(204)
        expect(deleted.text).toBe("")
        const again = yield* api.request("DELETE", "/api/ai/credentials/deepseek", { token })
        expect(again.status).toBe(404)
        expect(yield* bodyAs(ErrorBody)(again)).toMatchObject({ code: "CREDENTIAL_NOT_FOUND" })
      })
    ))

  it.live("a bad key is 400 INVALID_REQUEST naming apiKey, and nothing is stored", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine())
        const token = yield* tokenFor("user-a")
        for (const body of [{}, { apiKey: "" }, { apiKey: "has space" }, { apiKey: 42 }, { apiKey: "x".repeat(513) }]) {
          const response = yield* api.request("PUT", "/api/ai/credentials/deepseek", { token, body })
          expect(response.status, JSON.stringify(body)).toBe(400)
          const error = yield* bodyAs(ErrorBody)(response)
          expect(error.code).toBe("INVALID_REQUEST")
          expect(error.message).toContain("apiKey")
        }
        expect(yield* api.run(credentialRows)).toEqual([])
      })
    ))

  it.live("with a stored key new jobs use it, and the runtime resolves it only for such a live job", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine())
        const userA = yield* tokenFor("user-a")
        const userB = yield* tokenFor("user-b")
        const admin = yield* tokenFor("admin-1", "SUPER_ADMIN")
        const platformJob = yield* bodyAs(JobBody)(
          yield* api.request("POST", "/api/ai/flashcard-generations", { token: userA, body: flashcardBody() })
        )
        const stored = yield* bodyAs(Stored)(
          yield* api.request("PUT", "/api/ai/credentials/deepseek", { token: userA, body: { apiKey } })
        )
        const userKeyJob = yield* bodyAs(JobBody)(
          yield* api.request("POST", "/api/ai/flashcard-generations", { token: userA, body: flashcardBody() })
        )
        const detail = yield* api.request("GET", `/admin-api/ai/jobs/${userKeyJob.jobId}`, { token: admin })
        expect(detail.body).toMatchObject({ credentialMode: "user_deepseek_key" })
        const otherJob = yield* bodyAs(JobBody)(
          yield* api.request("POST", "/api/ai/flashcard-generations", { token: userB, body: flashcardBody() })
        )

        const resolve = (jobId: string, credentialId = stored.credentialId) =>
          api.request("POST", `/internal/credentials/${credentialId}/resolve`, { token: runtimeToken, body: { jobId } })
        const ok = yield* resolve(userKeyJob.jobId)
        expect(ok.status).toBe(200)
        expect(ok.body).toEqual({ credentialId: stored.credentialId, provider: "deepseek", apiKey })

        for (const jobId of [platformJob.jobId, otherJob.jobId, "00000000-0000-7000-8000-000000000000"]) {
          const refused = yield* resolve(jobId)
          expect(refused.status).toBe(404)
          expect(refused.text).not.toContain(apiKey)
        }
        const badBody = yield* api.request("POST", `/internal/credentials/${stored.credentialId}/resolve`, {
          token: runtimeToken,
          body: {}
        })
        expect(badBody.status).toBe(400)

        // An ended job no longer unlocks the key.
        yield* api.request("POST", `/api/ai/jobs/${userKeyJob.jobId}/cancel`, { token: userA })
        expect((yield* resolve(userKeyJob.jobId)).status).toBe(404)
      })
    ))

  it.live("logs carry ids only: never the key, a token or the job input", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine())
        const token = yield* tokenFor("user-a")
        const admin = yield* tokenFor("admin-1", "SUPER_ADMIN")
        const secretText = "CONFIDENTIAL-SOURCE-TEXT-42"
        yield* api.request("PUT", "/api/ai/credentials/deepseek", { token, body: { apiKey } })
        const job = yield* bodyAs(JobBody)(
          yield* api.request("POST", "/api/ai/flashcard-generations", {
            token,
            body: flashcardBody({ sourceText: secretText })
          })
        )
        yield* api.request("GET", "/api/ai/jobs", { token: `${token}x` })
        yield* api.request("POST", `/api/ai/jobs/${job.jobId}/cancel`, { token })
        yield* api.request("POST", `/admin-api/ai/jobs/${job.jobId}/retry`, { token: admin })
        yield* api.request("POST", "/internal/credentials/x/resolve", {
          token: "wrong-token",
          body: { jobId: job.jobId }
        })
        const lines = yield* Effect.flatMap(LogCapture, (capture) => capture.lines)
        expect(lines.length).toBeGreaterThan(0)
        const all = lines.join("\n")
        expect(all).toContain(job.jobId)
        for (const secret of [apiKey, token, admin, secretText, runtimeToken, "wrong-token"]) {
          expect(all).not.toContain(secret)
        }
      }).pipe(Effect.provide(LogCaptureLayer))
    ))
})
