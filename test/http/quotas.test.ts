import { describe, expect, it } from "@effect/vitest"
import { Effect, HashMap } from "effect"
import { MemoryDatabase } from "../../src/layers/memory/MemoryDatabase.js"
import {
  bodyAs,
  ErrorBody,
  feynmanBody,
  flashcardBody,
  JobBody,
  memoryEngine,
  startApi,
  tokenFor
} from "./support/harness.js"

describe("per-user limits", () => {
  it.live("20 parallel creates with MAX_ACTIVE_JOBS_PER_USER=5 accept exactly 5; the rest are 429 TOO_MANY_JOBS", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine({ maxActiveJobsPerUser: 5 }))
        const token = yield* tokenFor("user-a")
        const other = yield* tokenFor("user-b")
        const responses = yield* Effect.forEach(
          Array.from({ length: 20 }, (_, i) => i),
          (i) =>
            i % 2 === 0
              ? api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() })
              : api.request("POST", "/api/ai/feynman-evaluations", { token, body: feynmanBody() }),
          { concurrency: "unbounded" }
        )
        const accepted = responses.filter((r) => r.status === 202)
        const refused = responses.filter((r) => r.status === 429)
        expect(accepted).toHaveLength(5)
        expect(refused).toHaveLength(15)
        for (const r of refused) expect(yield* bodyAs(ErrorBody)(r)).toMatchObject({ code: "TOO_MANY_JOBS" })
        const tables = yield* api.run(Effect.flatMap(MemoryDatabase, (db) => db.snapshot))
        expect(HashMap.size(tables.aiJob)).toBe(5)
        expect(HashMap.size(tables.outboxEvent)).toBe(5)

        // Another user is not affected; a finished job frees a slot.
        const b = yield* api.request("POST", "/api/ai/flashcard-generations", { token: other, body: flashcardBody() })
        expect(b.status).toBe(202)
        const first = yield* bodyAs(JobBody)(accepted[0] ?? accepted[1] ?? b)
        const cancelled = yield* api.request("POST", `/api/ai/jobs/${first.jobId}/cancel`, { token })
        expect(cancelled.status).toBe(200)
        const again = yield* api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() })
        expect(again.status).toBe(202)
      })
    ))

  it.live("DAILY_JOB_QUOTA counts every job the user created today; the next is 429 QUOTA_EXCEEDED", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine({ maxActiveJobsPerUser: 100, dailyJobQuota: 3 }))
        const token = yield* tokenFor("user-a")
        const admin = yield* tokenFor("admin-1", "SUPER_ADMIN")
        const ids: Array<string> = []
        for (let i = 0; i < 3; i++) {
          const r = yield* api.request("POST", "/api/ai/flashcard-generations", {
            token,
            body: flashcardBody(),
            headers: { "Idempotency-Key": `k-${i}` }
          })
          expect(r.status).toBe(202)
          const job = yield* bodyAs(JobBody)(r)
          ids.push(job.jobId)
          // Cancelling does not give quota back (unlike the active limit).
          yield* api.request("POST", `/api/ai/jobs/${job.jobId}/cancel`, { token })
        }
        for (const path of ["/api/ai/flashcard-generations", "/api/ai/feynman-evaluations"]) {
          const over = yield* api.request("POST", path, {
            token,
            body: path.includes("flashcard") ? flashcardBody() : feynmanBody()
          })
          expect(over.status).toBe(429)
          expect(yield* bodyAs(ErrorBody)(over)).toMatchObject({ code: "QUOTA_EXCEEDED" })
        }
        // An idempotent repeat names a job that exists: it is answered, not counted again.
        const keyed = yield* api.request("POST", "/api/ai/flashcard-generations", {
          token,
          body: flashcardBody(),
          headers: { "Idempotency-Key": "k-0" }
        })
        expect(keyed.status).toBe(200)
        expect((yield* bodyAs(JobBody)(keyed)).jobId).toBe(ids[0])
        // An operator's retry skips the user's limits.
        const retried = yield* api.request("POST", `/admin-api/ai/jobs/${ids[0]}/retry`, { token: admin })
        expect(retried.status).toBe(201)
      })
    ))

  it.live("concurrent creates never exceed the daily quota", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine({ maxActiveJobsPerUser: 100, dailyJobQuota: 4 }))
        const token = yield* tokenFor("user-a")
        const responses = yield* Effect.forEach(
          Array.from({ length: 12 }, () => 0),
          () => api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() }),
          { concurrency: "unbounded" }
        )
        expect(responses.filter((r) => r.status === 202)).toHaveLength(4)
        expect(responses.filter((r) => r.status === 429)).toHaveLength(8)
      })
    ))
})
