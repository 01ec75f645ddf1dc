import { expect, layer } from "@effect/vitest"
import { Duration, Effect, type Layer, Option, Schema } from "effect"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import {
  bodyAs,
  ErrorBody,
  feynmanBody,
  flashcardBody,
  frozenKeys,
  JobBody,
  learningAnalysisBody,
  TestApi,
  tokenFor
} from "./harness.js"

/** The limits the batch suite's engine runs with: small enough to reach with a few batches. */
export const batchSuiteLimits = { maxActiveJobsPerUser: 8, dailyJobQuota: 12 } as const

export const BatchBody = Schema.Struct({ jobs: Schema.Array(JobBody) })

let users = 0
/** A user of its own per test (the layer, and its database, is shared by the block). */
const freshUser = (label: string) => `batch-${label}-${Date.now().toString(36)}-${++users}`

const sourceTexts = (count: number, label: string) =>
  Array.from(
    { length: count },
    (_, index) => flashcardBody({ sourceText: `${label} source text number ${index}.`, deckId: `deck-${index}` })
  )

/** Every job of a user, as the store holds them (none for a refused batch). */
const jobsOf = (userId: string) =>
  Effect.flatMap(AiJobLifecycleRepository, (repo) => repo.list({ userId }, { limit: 500 })).pipe(Effect.orDie)

const storedSourceText = (jobId: string) =>
  Effect.flatMap(AiJobLifecycleRepository, (repo) => repo.findById(jobId)).pipe(
    Effect.orDie,
    Effect.map(Option.map((job) => job.input)),
    Effect.flatMap(Option.match({
      onNone: () => Effect.dieMessage(`job ${jobId} not stored`),
      onSome: Schema.decodeUnknown(
        Schema.Struct({ sourceText: Schema.String }, { key: Schema.String, value: Schema.Unknown })
      )
    })),
    Effect.orDie,
    Effect.map((input) => input.sourceText)
  )

const post = (path: string, token: string, body: unknown, headers?: Record<string, string>) =>
  Effect.flatMap(TestApi, (api) => api.request("POST", path, { token, body, headers }))

const flashcardBatch = "/api/ai/flashcard-generations/batch"

/**
 * `POST /api/ai/{type}/batch`, the same cases over every backing: `api` gives `TestApi` and the
 * engine's services, with `batchSuiteLimits`.
 */
export const batchCreationCases = <E>(name: string, api: Layer.Layer<TestApi | AiJobLifecycleRepository, E>) =>
  layer(api, { excludeTestServices: true, timeout: Duration.seconds(60) })(`batch creation: ${name}`, (it) => {
    it.effect("202 with one frozen status per item, in the request's order, for every job type", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const userId = freshUser("order")
        const token = yield* tokenFor(userId)
        const items = sourceTexts(3, "order")
        const created = yield* post(flashcardBatch, token, { items })
        expect(created.status, created.text).toBe(202)
        const { jobs } = yield* bodyAs(BatchBody)(created)
        expect(jobs).toHaveLength(3)
        for (const job of jobs) {
          expect(frozenKeys).toEqual(expect.arrayContaining(Object.keys(job)))
          expect(job).toMatchObject({ jobType: "flashcard_generation", lifecycleStatus: "queued", progress: 0 })
          expect((yield* api.request("GET", `/api/ai/jobs/${job.jobId}`, { token })).status).toBe(200)
        }
        expect(new Set(jobs.map((job) => job.jobId)).size).toBe(3)
        const stored = yield* Effect.forEach(jobs, (job) => storedSourceText(job.jobId))
        expect(stored).toEqual(items.map((item) => item.sourceText))

        const feynman = yield* post("/api/ai/feynman-evaluations/batch", token, {
          items: [feynmanBody(), feynmanBody({ concept: "osmosis" })]
        })
        expect(feynman.status, feynman.text).toBe(202)
        expect((yield* bodyAs(BatchBody)(feynman)).jobs.map((job) => job.jobType)).toEqual([
          "feynman_evaluation",
          "feynman_evaluation"
        ])
        const analyses = yield* post("/api/ai/learning-analyses/batch", token, { items: [learningAnalysisBody()] })
        expect(analyses.status, analyses.text).toBe(202)
        expect((yield* bodyAs(BatchBody)(analyses)).jobs.map((job) => job.jobType)).toEqual(["learning_analysis"])
        expect(yield* jobsOf(userId)).toHaveLength(6)
      }))

    it.effect("one bad item: 400 INVALID_REQUEST naming its index, without the value sent; nothing is created", () =>
      Effect.gen(function*() {
        const userId = freshUser("bad-item")
        const token = yield* tokenFor(userId)
        const items = sourceTexts(5, "bad")
        const secret = `SECRET-${"x".repeat(70)}`
        const withBadItem = items.map((item, index) => (index === 3 ? { ...item, deckId: secret } : item))
        const refused = yield* post(flashcardBatch, token, { items: withBadItem })
        expect(refused.status, refused.text).toBe(400)
        const error = yield* bodyAs(ErrorBody)(refused)
        expect(error.code).toBe("INVALID_REQUEST")
        expect(error.message).toBe("items[3]: deckId: at most 64 characters")
        expect(refused.text).not.toContain("SECRET")
        const missing = yield* post(flashcardBatch, token, { items: [items[0], { count: 2 }] })
        expect((yield* bodyAs(ErrorBody)(missing)).message).toBe("items[1]: sourceText: is missing")
        expect(yield* jobsOf(userId)).toHaveLength(0)
      }))

    it.effect("limits: no items, more than 100 items or no items field are 400; nothing is created", () =>
      Effect.gen(function*() {
        const userId = freshUser("limits")
        const token = yield* tokenFor(userId)
        for (
          const body of [{ items: [] }, { items: sourceTexts(101, "many") }, {}, {
            items: sourceTexts(1, "one"),
            extra: 1
          }]
        ) {
          const refused = yield* post(flashcardBatch, token, body)
          expect(refused.status, refused.text).toBe(400)
          expect((yield* bodyAs(ErrorBody)(refused)).code).toBe("INVALID_REQUEST")
        }
        const none = yield* post(flashcardBatch, token, { items: [] })
        expect((yield* bodyAs(ErrorBody)(none)).message).toBe("items: must not be empty")
        const many = yield* post(flashcardBatch, token, { items: sourceTexts(101, "many") })
        expect((yield* bodyAs(ErrorBody)(many)).message).toBe("items: must have at most 100 items")
        expect(yield* jobsOf(userId)).toHaveLength(0)
      }))

    it.effect("admission counts the whole batch: past the active limit or the daily quota it is refused whole, with the single create's codes", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const userId = freshUser("admission")
        const token = yield* tokenFor(userId)
        const tooMany = yield* post(flashcardBatch, token, {
          items: sourceTexts(batchSuiteLimits.maxActiveJobsPerUser + 1, "over")
        })
        expect(tooMany.status, tooMany.text).toBe(429)
        expect((yield* bodyAs(ErrorBody)(tooMany)).code).toBe("TOO_MANY_JOBS")
        expect(yield* jobsOf(userId)).toHaveLength(0)

        const full = yield* post(flashcardBatch, token, {
          items: sourceTexts(batchSuiteLimits.maxActiveJobsPerUser, "full")
        })
        expect(full.status, full.text).toBe(202)
        const single = yield* post("/api/ai/flashcard-generations", token, flashcardBody())
        expect((yield* bodyAs(ErrorBody)(single)).code).toBe("TOO_MANY_JOBS")
        const oneMore = yield* post(flashcardBatch, token, { items: sourceTexts(1, "one-more") })
        expect((yield* bodyAs(ErrorBody)(oneMore)).code).toBe("TOO_MANY_JOBS")

        // Cancelled, the jobs no longer count as active; they still count against the day's quota.
        for (const job of (yield* bodyAs(BatchBody)(full)).jobs) {
          expect((yield* api.request("POST", `/api/ai/jobs/${job.jobId}/cancel`, { token })).status).toBe(200)
        }
        const left = batchSuiteLimits.dailyJobQuota - batchSuiteLimits.maxActiveJobsPerUser
        const overQuota = yield* post(flashcardBatch, token, { items: sourceTexts(left + 1, "quota") })
        expect(overQuota.status, overQuota.text).toBe(429)
        expect((yield* bodyAs(ErrorBody)(overQuota)).code).toBe("QUOTA_EXCEEDED")
        expect(overQuota.headers.get("retry-after")).not.toBeNull()
        expect(yield* jobsOf(userId)).toHaveLength(batchSuiteLimits.maxActiveJobsPerUser)
        const upToQuota = yield* post(flashcardBatch, token, { items: sourceTexts(left, "quota") })
        expect(upToQuota.status, upToQuota.text).toBe(202)
        expect(yield* jobsOf(userId)).toHaveLength(batchSuiteLimits.dailyJobQuota)
      }))

    it.effect("Idempotency-Key covers the batch: the same body answers 200 with the same jobs in order; another body is 409", () =>
      Effect.gen(function*() {
        const userId = freshUser("idempotent")
        const token = yield* tokenFor(userId)
        const headers = { "idempotency-key": "batch-key-1" }
        const items = sourceTexts(3, "idempotent")
        const first = yield* post(flashcardBatch, token, { items }, headers)
        expect(first.status, first.text).toBe(202)
        const again = yield* post(flashcardBatch, token, { items }, headers)
        expect(again.status, again.text).toBe(200)
        const ids = (yield* bodyAs(BatchBody)(first)).jobs.map((job) => job.jobId)
        expect((yield* bodyAs(BatchBody)(again)).jobs.map((job) => job.jobId)).toEqual(ids)

        const other = yield* post(flashcardBatch, token, { items: items.slice(0, 2) }, headers)
        expect(other.status, other.text).toBe(409)
        expect((yield* bodyAs(ErrorBody)(other)).code).toBe("IDEMPOTENCY_KEY_REUSED")
        // Another user's same key is another batch.
        const otherUser = yield* post(
          flashcardBatch,
          yield* tokenFor(freshUser("idempotent-other")),
          { items },
          headers
        )
        expect(otherUser.status).toBe(202)
        expect(yield* jobsOf(userId)).toHaveLength(3)
      }))

    it.effect("concurrent batches with one Idempotency-Key make one batch: every answer names the same jobs", () =>
      Effect.gen(function*() {
        const userId = freshUser("race")
        const token = yield* tokenFor(userId)
        const items = sourceTexts(4, "race")
        const answers = yield* Effect.all(
          Array.from({ length: 6 }, () => post(flashcardBatch, token, { items }, { "idempotency-key": "race-key" })),
          { concurrency: "unbounded" }
        )
        expect(answers.map((answer) => answer.status).sort()).toEqual([200, 200, 200, 200, 200, 202])
        const idLists = yield* Effect.forEach(
          answers,
          (answer) => Effect.map(bodyAs(BatchBody)(answer), (body) => body.jobs.map((job) => job.jobId).join(","))
        )
        expect(new Set(idLists).size).toBe(1)
        expect(yield* jobsOf(userId)).toHaveLength(4)
      }))

    it.effect("ownership as for single creates: no token is 401; the jobs are the caller's, another user sees none of them", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const items = sourceTexts(2, "owner")
        expect((yield* api.request("POST", flashcardBatch, { body: { items } })).status).toBe(401)
        const owner = yield* tokenFor(freshUser("owner"))
        const stranger = yield* tokenFor(freshUser("stranger"))
        const { jobs } = yield* bodyAs(BatchBody)(yield* post(flashcardBatch, owner, { items }))
        for (const job of jobs) {
          expect((yield* api.request("GET", `/api/ai/jobs/${job.jobId}`, { token: stranger })).status).toBe(404)
          expect((yield* api.request("POST", `/api/ai/jobs/${job.jobId}/cancel`, { token: stranger })).status).toBe(404)
        }
        const listed = yield* api.request("GET", "/api/ai/jobs", { token: owner })
        expect(listed.text).toContain(jobs[0]?.jobId)
        expect((yield* api.request("GET", "/api/ai/jobs", { token: stranger })).text).not.toContain(jobs[0]?.jobId)
      }))
  })
