import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, HashMap, Option, Schema } from "effect"
import { MemoryDatabase } from "../../src/layers/memory/MemoryDatabase.js"
import { CancelSignal } from "../../src/services/CancelSignal.js"
import {
  bodyAs,
  ErrorBody,
  feynmanBody,
  flashcardBody,
  frozenKeys,
  JobBody,
  markFailed,
  markRunning,
  markSucceeded,
  memoryEngine,
  PageBody,
  startApi,
  tokenFor
} from "./support/harness.js"
import { jobRoutes } from "./support/routes.js"

const keysOf = (value: unknown): ReadonlyArray<string> =>
  typeof value === "object" && value !== null ? Object.keys(value) : []

const tableSizes = Effect.map(
  Effect.flatMap(MemoryDatabase, (db) => db.snapshot),
  (tables) => ({
    jobs: HashMap.size(tables.aiJob),
    snapshots: HashMap.size(tables.aiJobSnapshot),
    outbox: HashMap.size(tables.outboxEvent)
  })
)

const ArtifactsBody = Schema.Struct({
  jobId: Schema.String,
  lifecycleStatus: Schema.String,
  artifacts: Schema.Array(
    Schema.Struct({ artifactType: Schema.String, artifactId: Schema.String, ordinal: Schema.Number })
  ),
  records: Schema.Array(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})

const setup = Effect.gen(function*() {
  const api = yield* startApi(memoryEngine())
  const userA = yield* tokenFor("user-a")
  const userB = yield* tokenFor("user-b")
  const admin = yield* tokenFor("admin-1", "SUPER_ADMIN")
  const createFlashcards = (token: string, body: unknown = flashcardBody(), headers?: Record<string, string>) =>
    api.request("POST", "/api/ai/flashcard-generations", { token, body, headers })
  const createdJob = (token: string, body: unknown = flashcardBody()) =>
    Effect.flatMap(createFlashcards(token, body), bodyAs(JobBody))
  return { api, userA, userB, admin, createFlashcards, createdJob }
})

describe("job creation", () => {
  it.live("POST /api/ai/flashcard-generations and /feynman-evaluations answer 202 with the frozen JobStatusResponse", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, createFlashcards } = yield* setup
        const flashcards = yield* createFlashcards(userA, flashcardBody({ deckId: "deck-1" }))
        expect(flashcards.status).toBe(202)
        const job = yield* bodyAs(JobBody)(flashcards)
        expect(job).toMatchObject({
          jobType: "flashcard_generation",
          lifecycleStatus: "queued",
          queueName: "ai-background",
          progress: 0
        })
        expect(keysOf(flashcards.body).every((key) => frozenKeys.includes(key))).toBe(true)
        expect(new Date(job.createdAt).toISOString()).toBe(job.createdAt)

        const feynman = yield* api.request("POST", "/api/ai/feynman-evaluations", { token: userA, body: feynmanBody() })
        expect(feynman.status).toBe(202)
        expect(yield* bodyAs(JobBody)(feynman)).toMatchObject({
          jobType: "feynman_evaluation",
          queueName: "ai-interactive"
        })

        const stored = yield* api.run(tableSizes)
        expect(stored).toEqual({ jobs: 2, snapshots: 2, outbox: 2 })
      })
    ))

  it.live("the same Idempotency-Key returns the same job with 200; other users and job types are separate", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, userB, createFlashcards } = yield* setup
        const headers = { "Idempotency-Key": "key-1" }
        const first = yield* createFlashcards(userA, flashcardBody(), headers)
        const again = yield* createFlashcards(userA, flashcardBody(), headers)
        expect(first.status).toBe(202)
        expect(again.status).toBe(200)
        const a = yield* bodyAs(JobBody)(first)
        const b = yield* bodyAs(JobBody)(again)
        expect(b.jobId).toBe(a.jobId)

        const otherUser = yield* createFlashcards(userB, flashcardBody(), headers)
        expect(otherUser.status).toBe(202)
        expect((yield* bodyAs(JobBody)(otherUser)).jobId).not.toBe(a.jobId)

        const otherType = yield* api.request("POST", "/api/ai/feynman-evaluations", {
          token: userA,
          body: feynmanBody(),
          headers
        })
        expect(otherType.status).toBe(202)
        expect(yield* api.run(tableSizes)).toMatchObject({ jobs: 3, outbox: 3 })
      })
    ))

  it.live("concurrent creates with one Idempotency-Key make one job", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, createFlashcards } = yield* setup
        const responses = yield* Effect.forEach(
          Array.from({ length: 10 }, () => 0),
          () => createFlashcards(userA, flashcardBody(), { "Idempotency-Key": "same" }),
          { concurrency: "unbounded" }
        )
        const statuses = responses.map((r) => r.status).sort()
        expect(statuses.filter((s) => s === 202)).toHaveLength(1)
        expect(statuses.filter((s) => s === 200)).toHaveLength(9)
        const ids = new Set(yield* Effect.forEach(responses, (r) => Effect.map(bodyAs(JobBody)(r), (j) => j.jobId)))
        expect(ids.size).toBe(1)
        expect((yield* api.run(tableSizes)).jobs).toBe(1)
      })
    ))

  it.live("a bad body, header or JSON is 400 INVALID_REQUEST naming the field, and nothing is written", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA } = yield* setup
        const cases: ReadonlyArray<
          {
            readonly path: string
            readonly body?: unknown
            readonly raw?: string
            readonly headers?: Record<string, string>
            readonly field: string
          }
        > = [
          { path: "/api/ai/flashcard-generations", body: flashcardBody({ count: 0 }), field: "count" },
          { path: "/api/ai/flashcard-generations", body: flashcardBody({ count: 51 }), field: "count" },
          { path: "/api/ai/flashcard-generations", body: flashcardBody({ count: 1.5 }), field: "count" },
          { path: "/api/ai/flashcard-generations", body: flashcardBody({ count: "3" }), field: "count" },
          { path: "/api/ai/flashcard-generations", body: { count: 3 }, field: "sourceText" },
          { path: "/api/ai/flashcard-generations", body: flashcardBody({ sourceText: "" }), field: "sourceText" },
          {
            path: "/api/ai/flashcard-generations",
            body: flashcardBody({ sourceText: "x".repeat(20_001) }),
            field: "sourceText"
          },
          { path: "/api/ai/flashcard-generations", body: flashcardBody({ deckId: "" }), field: "deckId" },
          { path: "/api/ai/flashcard-generations", body: flashcardBody({ deckID: "typo" }), field: "deckID" },
          { path: "/api/ai/flashcard-generations", body: [1, 2], field: "" },
          { path: "/api/ai/flashcard-generations", raw: "{\"sourceText\": ", field: "body" },
          {
            path: "/api/ai/flashcard-generations",
            body: flashcardBody(),
            headers: { "Idempotency-Key": "k".repeat(192) },
            field: "idempotency-key"
          },
          { path: "/api/ai/feynman-evaluations", body: { concept: "c" }, field: "explanation" },
          { path: "/api/ai/feynman-evaluations", body: feynmanBody({ concept: "c".repeat(256) }), field: "concept" }
        ]
        for (const c of cases) {
          const response = yield* api.request("POST", c.path, {
            token: userA,
            body: c.body,
            rawBody: c.raw,
            headers: c.headers
          })
          expect(response.status, `${c.field}: ${response.text}`).toBe(400)
          const error = yield* bodyAs(ErrorBody)(response)
          expect(error.code).toBe("INVALID_REQUEST")
          expect(error.message, response.text).toContain(c.field)
          expect(keysOf(response.body)).toEqual(["code", "message"])
        }
        const multi = yield* api.request("POST", "/api/ai/flashcard-generations", {
          token: userA,
          body: { sourceText: "", count: 0 }
        })
        const message = (yield* bodyAs(ErrorBody)(multi)).message
        expect(message).toContain("sourceText")
        expect(message).toContain("count")
        expect(yield* api.run(tableSizes)).toEqual({ jobs: 0, snapshots: 0, outbox: 0 })
      })
    ))
})

describe("job status, list and artifacts", () => {
  it.live("GET /api/ai/jobs/:jobId: the owner and a SUPER_ADMIN see it; anyone else gets the same 404 as a missing job", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, userB, admin, createdJob } = yield* setup
        const job = yield* createdJob(userA)
        const own = yield* api.request("GET", `/api/ai/jobs/${job.jobId}`, { token: userA })
        expect(own.status).toBe(200)
        expect(yield* bodyAs(JobBody)(own)).toEqual(job)
        const byAdmin = yield* api.request("GET", `/api/ai/jobs/${job.jobId}`, { token: admin })
        expect(byAdmin.status).toBe(200)
        expect(keysOf(byAdmin.body)).not.toContain("internalErrorMessage")

        const foreign = yield* api.request("GET", `/api/ai/jobs/${job.jobId}`, { token: userB })
        const missing = yield* api.request("GET", "/api/ai/jobs/00000000-0000-7000-8000-000000000000", { token: userB })
        expect(foreign.status).toBe(404)
        expect(missing.status).toBe(404)
        expect(foreign.body).toEqual(missing.body)
        expect(foreign.body).toEqual({ code: "JOB_NOT_FOUND", message: expect.any(String) })
      })
    ))

  it.live("user B gets 404 JOB_NOT_FOUND for user A's job on every job route, and changes nothing", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, userB, createdJob } = yield* setup
        const queued = yield* createdJob(userA)
        const succeeded = yield* createdJob(userA)
        yield* api.run(markSucceeded(succeeded.jobId, { flashcards: [{ front: "f", back: "b" }] }))
        for (const job of [queued, succeeded]) {
          for (const route of jobRoutes(job.jobId)) {
            const response = yield* api.request(route.method, route.path, { token: userB })
            expect(response.status, `${route.method} ${route.path}`).toBe(404)
            expect(yield* bodyAs(ErrorBody)(response)).toMatchObject({ code: "JOB_NOT_FOUND" })
          }
        }
        const still = yield* api.request("GET", `/api/ai/jobs/${queued.jobId}`, { token: userA })
        expect((yield* bodyAs(JobBody)(still)).lifecycleStatus).toBe("queued")
        const list = yield* api.request("GET", "/api/ai/jobs", { token: userB })
        expect((yield* bodyAs(PageBody)(list)).items).toEqual([])
      })
    ))

  it.live("GET /api/ai/jobs lists the caller's jobs newest first, with an opaque cursor and a status filter", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, userB, createdJob } = yield* setup
        const mine: Array<string> = []
        for (let i = 0; i < 5; i++) {
          mine.push((yield* createdJob(userA)).jobId)
          yield* createdJob(userB)
          yield* Effect.sleep("2 millis")
        }
        yield* api.run(markRunning(mine[1] ?? ""))
        const seen: Array<string> = []
        let cursor: string | null = null
        let pages = 0
        do {
          const query: string = cursor === null ? "?limit=2" : `?limit=2&cursor=${cursor}`
          const response = yield* api.request("GET", `/api/ai/jobs${query}`, { token: userA })
          expect(response.status).toBe(200)
          const page = yield* bodyAs(PageBody)(response)
          expect(page.items.length).toBeLessThanOrEqual(2)
          seen.push(...page.items.map((item) => item.jobId))
          cursor = page.nextCursor
          if (cursor !== null) expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/)
          pages++
        } while (cursor !== null && pages < 10)
        expect(pages).toBe(3)
        expect(seen).toEqual([...mine].reverse())

        const all = yield* bodyAs(PageBody)(yield* api.request("GET", "/api/ai/jobs", { token: userA }))
        expect(all.items.map((i) => i.jobId)).toEqual([...mine].reverse())
        expect(all.nextCursor).toBeNull()

        const running = yield* bodyAs(PageBody)(
          yield* api.request("GET", "/api/ai/jobs?status=running", { token: userA })
        )
        expect(running.items.map((i) => i.jobId)).toEqual([mine[1]])

        for (
          const [query, field] of [
            ["?limit=0", "limit"],
            ["?limit=101", "limit"],
            ["?limit=abc", "limit"],
            ["?status=done", "status"],
            ["?cursor=not-a-cursor", "cursor"],
            [`?cursor=${Buffer.from("{\"id\":1}").toString("base64url")}`, "cursor"]
          ] as const
        ) {
          const bad = yield* api.request("GET", `/api/ai/jobs${query}`, { token: userA })
          expect(bad.status, query).toBe(400)
          const error = yield* bodyAs(ErrorBody)(bad)
          expect(error.code).toBe("INVALID_REQUEST")
          expect(error.message).toContain(field)
        }
      })
    ))

  it.live("the default page is 20 and the limit may go to 100", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, createdJob } = yield* setup
        for (let i = 0; i < 21; i++) yield* createdJob(userA)
        const first = yield* bodyAs(PageBody)(yield* api.request("GET", "/api/ai/jobs", { token: userA }))
        expect(first.items).toHaveLength(20)
        expect(first.nextCursor).not.toBeNull()
        const big = yield* bodyAs(PageBody)(yield* api.request("GET", "/api/ai/jobs?limit=100", { token: userA }))
        expect(big.items).toHaveLength(21)
        expect(big.nextCursor).toBeNull()
      })
    ))

  it.live("a succeeded job shows its result, and /artifacts returns the projected records", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, admin, createdJob } = yield* setup
        const job = yield* createdJob(userA, flashcardBody({ deckId: "deck-7" }))
        const before = yield* api.request("GET", `/api/ai/jobs/${job.jobId}/artifacts`, { token: userA })
        expect(before.status).toBe(200)
        expect(yield* bodyAs(ArtifactsBody)(before)).toMatchObject({
          lifecycleStatus: "queued",
          artifacts: [],
          records: []
        })

        yield* api.run(
          markSucceeded(job.jobId, {
            flashcards: [
              { front: "What does photosynthesis make?", back: "Glucose and oxygen" },
              { front: "What does it need?", back: "Light, water, CO2" }
            ]
          })
        )
        const status = yield* bodyAs(JobBody)(yield* api.request("GET", `/api/ai/jobs/${job.jobId}`, { token: userA }))
        expect(status.lifecycleStatus).toBe("succeeded")
        expect(status.finishedAt).toBeDefined()
        expect(status.result?.artifactCount).toBe(2)
        expect(status.result?.artifacts.map((a) => a.artifactType)).toEqual(["flashcard", "flashcard"])

        for (const token of [userA, admin]) {
          const response = yield* api.request("GET", `/api/ai/jobs/${job.jobId}/artifacts`, { token })
          expect(response.status).toBe(200)
          const artifacts = yield* bodyAs(ArtifactsBody)(response)
          expect(artifacts.artifacts.map((a) => a.ordinal)).toEqual([0, 1])
          expect(artifacts.records).toEqual([
            expect.objectContaining({
              front: "What does photosynthesis make?",
              back: "Glucose and oxygen",
              deckId: "deck-7",
              ordinal: 0
            }),
            expect.objectContaining({ front: "What does it need?", back: "Light, water, CO2", ordinal: 1 })
          ])
          expect(artifacts.records.map((r) => r["id"])).toEqual(artifacts.artifacts.map((a) => a.artifactId))
        }
      })
    ))

  it.live("a failed job shows its code and public message, never the internal one, a stack, a path or an address", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, createdJob } = yield* setup
        const clean = yield* createdJob(userA)
        yield* api.run(
          markFailed(clean.jobId, {
            errorCode: "PROVIDER_UNAVAILABLE",
            publicErrorMessage: "The AI provider is unavailable right now. Please try again later.",
            internalErrorMessage: "connect ECONNREFUSED 10.0.0.7:443 at /srv/app/gateway.ts:42"
          })
        )
        const leaky = yield* createdJob(userA)
        yield* api.run(
          markFailed(leaky.jobId, {
            errorCode: "INTERNAL_ERROR",
            publicErrorMessage: "Error: boom\n    at run (/srv/app/src/pipeline/engine.ts:10:5) via 10.0.0.7:3306",
            internalErrorMessage: "stack"
          })
        )
        const a = yield* api.request("GET", `/api/ai/jobs/${clean.jobId}`, { token: userA })
        expect(yield* bodyAs(JobBody)(a)).toMatchObject({
          lifecycleStatus: "failed",
          errorCode: "PROVIDER_UNAVAILABLE",
          publicErrorMessage: "The AI provider is unavailable right now. Please try again later."
        })
        expect(a.text).not.toContain("ECONNREFUSED")
        expect(keysOf(a.body)).not.toContain("internalErrorMessage")
        const b = yield* api.request("GET", `/api/ai/jobs/${leaky.jobId}`, { token: userA })
        const leakyBody = yield* bodyAs(JobBody)(b)
        expect(leakyBody.publicErrorMessage).toBe("The job failed.")
        expect(b.text).not.toMatch(/\/srv|10\.0\.0\.7|\n\s*at /)
        const list = yield* api.request("GET", "/api/ai/jobs", { token: userA })
        expect(list.text).not.toMatch(/internalErrorMessage|ECONNREFUSED|\/srv/)
      })
    ))
})

describe("cancel", () => {
  it.live("POST /api/ai/jobs/:jobId/cancel: queued → cancelled; again → 409 JOB_ALREADY_CANCELLED", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, createdJob } = yield* setup
        const job = yield* createdJob(userA)
        const cancelled = yield* api.request("POST", `/api/ai/jobs/${job.jobId}/cancel`, { token: userA })
        expect(cancelled.status).toBe(200)
        expect(yield* bodyAs(JobBody)(cancelled)).toMatchObject({ jobId: job.jobId, lifecycleStatus: "cancelled" })
        const again = yield* api.request("POST", `/api/ai/jobs/${job.jobId}/cancel`, { token: userA })
        expect(again.status).toBe(409)
        expect(again.body).toEqual({ code: "JOB_ALREADY_CANCELLED", message: expect.any(String) })
      })
    ))

  it.live("running → cancel requested (still running) and the cancel signal is published", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, createdJob } = yield* setup
        const job = yield* createdJob(userA)
        yield* api.run(markRunning(job.jobId))
        const heard = yield* api.run(Effect.flatMap(CancelSignal, (signal) => signal.await(job.jobId))).pipe(
          Effect.fork
        )
        yield* Effect.sleep("50 millis")
        const response = yield* api.request("POST", `/api/ai/jobs/${job.jobId}/cancel`, { token: userA })
        expect(response.status).toBe(200)
        expect(yield* bodyAs(JobBody)(response)).toMatchObject({ lifecycleStatus: "running" })
        const outcome = yield* Fiber.join(heard).pipe(Effect.timeoutOption("2 seconds"))
        expect(Option.isSome(outcome)).toBe(true)
        const admin = yield* tokenFor("admin-1", "SUPER_ADMIN")
        const detail = yield* api.request("GET", `/admin-api/ai/jobs/${job.jobId}`, { token: admin })
        expect(detail.body).toMatchObject({ lifecycleStatus: "running", cancelRequestedAt: expect.any(String) })
      })
    ))

  it.live("an ended job is 409 JOB_NOT_CANCELLABLE; a missing one 404; only the owner may cancel", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, admin, createdJob } = yield* setup
        const succeeded = yield* createdJob(userA)
        yield* api.run(markSucceeded(succeeded.jobId, { flashcards: [{ front: "f", back: "b" }] }))
        const failed = yield* createdJob(userA)
        yield* api.run(
          markFailed(failed.jobId, {
            errorCode: "TIMEOUT",
            publicErrorMessage: "The job took too long and was stopped.",
            internalErrorMessage: "t"
          })
        )
        for (const job of [succeeded, failed]) {
          const response = yield* api.request("POST", `/api/ai/jobs/${job.jobId}/cancel`, { token: userA })
          expect(response.status).toBe(409)
          expect(response.body).toEqual({ code: "JOB_NOT_CANCELLABLE", message: expect.any(String) })
        }
        const missing = yield* api.request("POST", "/api/ai/jobs/00000000-0000-7000-8000-000000000000/cancel", {
          token: userA
        })
        expect(missing.status).toBe(404)
        const queued = yield* createdJob(userA)
        const byAdmin = yield* api.request("POST", `/api/ai/jobs/${queued.jobId}/cancel`, { token: admin })
        expect(byAdmin.status).toBe(404)
      })
    ))
})
