import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Fiber, Layer, Option, Schema } from "effect"
import { leaseOf } from "../../src/domain/AiJob.js"
import { ReadinessProbeLive } from "../../src/main/AppLayers.js"
import { AiJobLifecycleRepository } from "../../src/services/AiJobLifecycleRepository.js"
import { CancelSignal } from "../../src/services/CancelSignal.js"
import { deadRedisLayer, uniqueRedisPrefix } from "../support/redis.js"
import {
  apiLayer,
  bodyAs,
  ErrorBody,
  feynmanBody,
  flashcardBody,
  JobBody,
  markFailed,
  markRunning,
  markSucceeded,
  PageBody,
  runtimeToken,
  TestApi,
  tokenFor
} from "./support/harness.js"
import { mysqlEngine } from "./support/mysqlEngine.js"
import { jobRoutes } from "./support/routes.js"

const Count = Schema.Struct({ n: Schema.Number })

/** Rows of a table (name from this file only). */
const countRows = (table: "ai_job" | "ai_job_snapshot" | "outbox_event") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql.unsafe(`SELECT COUNT(*) AS n FROM ${table}`)
    const [row] = yield* Schema.decodeUnknown(Schema.Array(Count))(rows)
    return row?.n ?? 0
  }).pipe(Effect.orDie)

const timeout = { timeout: "60 seconds" } as const

const engine = mysqlEngine("http_api")

layer(apiLayer(engine, { probe: ReadinessProbeLive }), { excludeTestServices: true, ...timeout })(
  "HTTP API on MySQL + Redis",
  (it) => {
    it.effect("/readyz: MySQL and Redis answer", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const ready = yield* api.request("GET", "/readyz")
        expect(ready.status).toBe(200)
        expect(ready.body).toMatchObject({
          status: "ready",
          checks: [
            { name: "database", backend: "mysql", status: "up" },
            { name: "redis", backend: "redis", status: "up" }
          ]
        })
      }))

    it.effect("create (202), idempotent repeat (200), status, list with cursor", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const token = yield* tokenFor("mysql-user-1")
        const first = yield* api.request("POST", "/api/ai/flashcard-generations", {
          token,
          body: flashcardBody({ deckId: "deck-1" }),
          headers: { "Idempotency-Key": "m-1" }
        })
        expect(first.status).toBe(202)
        const job = yield* bodyAs(JobBody)(first)
        const again = yield* api.request("POST", "/api/ai/flashcard-generations", {
          token,
          body: flashcardBody({ deckId: "deck-1" }),
          headers: { "Idempotency-Key": "m-1" }
        })
        expect(again.status).toBe(200)
        expect((yield* bodyAs(JobBody)(again)).jobId).toBe(job.jobId)

        const status = yield* api.request("GET", `/api/ai/jobs/${job.jobId}`, { token })
        expect(yield* bodyAs(JobBody)(status)).toEqual(job)

        const ids = [job.jobId]
        for (let i = 0; i < 4; i++) {
          const created = yield* api.request("POST", "/api/ai/feynman-evaluations", { token, body: feynmanBody() })
          ids.push((yield* bodyAs(JobBody)(created)).jobId)
        }
        const seen: Array<string> = []
        let cursor: string | null = null
        for (let page = 0; page < 5; page++) {
          const query: string = cursor === null ? "?limit=2" : `?limit=2&cursor=${cursor}`
          const listed = yield* bodyAs(PageBody)(yield* api.request("GET", `/api/ai/jobs${query}`, { token }))
          seen.push(...listed.items.map((i) => i.jobId))
          cursor = listed.nextCursor
          if (cursor === null) break
        }
        // UUIDv7 ids order like creation time, the list's tiebreak.
        expect(seen).toEqual([...ids].reverse())
      }))

    it.effect("a bad body is 400 naming the field, and no row is written", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const token = yield* tokenFor("mysql-user-2")
        const before = yield* Effect.all([countRows("ai_job"), countRows("ai_job_snapshot"), countRows("outbox_event")])
        const bad = yield* api.request("POST", "/api/ai/flashcard-generations", {
          token,
          body: flashcardBody({ count: 99 })
        })
        expect(bad.status).toBe(400)
        expect((yield* bodyAs(ErrorBody)(bad)).message).toContain("count")
        const after = yield* Effect.all([countRows("ai_job"), countRows("ai_job_snapshot"), countRows("outbox_event")])
        expect(after).toEqual(before)
      }))

    it.effect("user B gets 404 on every job route; cancel queued and running (signal over Redis); artifacts of a succeeded job", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const owner = yield* tokenFor("mysql-user-3")
        const stranger = yield* tokenFor("mysql-user-4")
        const create = Effect.flatMap(
          api.request("POST", "/api/ai/flashcard-generations", { token: owner, body: flashcardBody() }),
          bodyAs(JobBody)
        )
        const queued = yield* create
        for (const route of jobRoutes(queued.jobId)) {
          const response = yield* api.request(route.method, route.path, { token: stranger })
          expect(response.status, `${route.method} ${route.path}`).toBe(404)
        }
        const cancelled = yield* api.request("POST", `/api/ai/jobs/${queued.jobId}/cancel`, { token: owner })
        expect(yield* bodyAs(JobBody)(cancelled)).toMatchObject({ lifecycleStatus: "cancelled" })
        const twice = yield* api.request("POST", `/api/ai/jobs/${queued.jobId}/cancel`, { token: owner })
        expect(twice.status).toBe(409)
        expect(twice.body).toMatchObject({ code: "JOB_ALREADY_CANCELLED" })

        const running = yield* create
        yield* markRunning(running.jobId)
        const signal = yield* CancelSignal
        const heard = yield* Effect.fork(signal.await(running.jobId))
        yield* Effect.sleep("100 millis")
        const requested = yield* api.request("POST", `/api/ai/jobs/${running.jobId}/cancel`, { token: owner })
        expect(yield* bodyAs(JobBody)(requested)).toMatchObject({ lifecycleStatus: "running" })
        expect(Option.isSome(yield* Fiber.join(heard).pipe(Effect.timeoutOption("3 seconds")))).toBe(true)

        const done = yield* create
        yield* markSucceeded(done.jobId, { flashcards: [{ front: "Q1", back: "A1" }, { front: "Q2", back: "A2" }] })
        const status = yield* bodyAs(JobBody)(yield* api.request("GET", `/api/ai/jobs/${done.jobId}`, { token: owner }))
        expect(status.result?.artifactCount).toBe(2)
        const artifacts = yield* api.request("GET", `/api/ai/jobs/${done.jobId}/artifacts`, { token: owner })
        expect(artifacts.status).toBe(200)
        expect(artifacts.body).toMatchObject({
          lifecycleStatus: "succeeded",
          records: [
            { front: "Q1", back: "A1", ordinal: 0 },
            { front: "Q2", back: "A2", ordinal: 1 }
          ]
        })
        const notCancellable = yield* api.request("POST", `/api/ai/jobs/${done.jobId}/cancel`, { token: owner })
        expect(notCancellable.body).toMatchObject({ code: "JOB_NOT_CANCELLABLE" })
      }))

    it.effect("a cancel racing the worker's finish: a 409 wrote nothing, and a stamped request was answered as accepted", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const repo = yield* AiJobLifecycleRepository
        const owner = yield* tokenFor("mysql-user-cancel-race")
        const jobs = 12
        const cancelsPerJob = 2
        for (let round = 0; round < jobs; round++) {
          const job = yield* Effect.flatMap(
            api.request("POST", "/api/ai/flashcard-generations", { token: owner, body: flashcardBody() }),
            bodyAs(JobBody)
          )
          const running = yield* markRunning(job.jobId)
          const lease = leaseOf(running)!
          const cancels = Effect.forEach(
            Array.from({ length: cancelsPerJob }, (_, i) => i),
            (i) =>
              Effect.zipRight(
                Effect.sleep(`${i} millis`),
                api.request("POST", `/api/ai/jobs/${job.jobId}/cancel`, { token: owner })
              ),
            { concurrency: "unbounded" }
          )
          const finish = Effect.zipRight(
            Effect.sleep(`${round % 5} millis`),
            Effect.either(repo.markSucceeded(lease, "0".repeat(64), { locked: running }))
          )
          const [answers] = yield* Effect.all([cancels, finish], { concurrency: "unbounded" })
          const accepted = answers.filter((answer) => answer.status >= 200 && answer.status < 300)
          const refused = answers.filter((answer) => answer.status === 409)
          expect(accepted.length + refused.length, JSON.stringify(answers.map((a) => a.status))).toBe(cancelsPerJob)
          const row = Option.getOrThrow(yield* repo.findById(job.jobId))
          // The request is on the row exactly when some cancel was answered as accepted.
          expect({ stamped: row.cancelRequestedAt !== null, round }).toStrictEqual({
            stamped: accepted.length > 0,
            round
          })
        }
      }))

    it.effect("admin: list with filters, detail with internalErrorMessage, retry, outbox counts; a USER is 403", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const user = yield* tokenFor("mysql-user-5")
        const admin = yield* tokenFor("mysql-admin", "SUPER_ADMIN")
        const job = yield* bodyAs(JobBody)(
          yield* api.request("POST", "/api/ai/feynman-evaluations", { token: user, body: feynmanBody() })
        )
        yield* markFailed(job.jobId, {
          errorCode: "PROVIDER_RATE_LIMITED",
          publicErrorMessage: "The AI provider is busy. Please try again later.",
          internalErrorMessage: "429 from provider, retry-after 30"
        })
        const detail = yield* api.request("GET", `/admin-api/ai/jobs/${job.jobId}`, { token: admin })
        expect(detail.body).toMatchObject({
          userId: "mysql-user-5",
          internalErrorMessage: "429 from provider, retry-after 30"
        })
        const own = yield* api.request("GET", `/api/ai/jobs/${job.jobId}`, { token: user })
        expect(own.text).not.toContain("retry-after")

        const failedList = yield* api.request("GET", "/admin-api/ai/jobs?status=failed&jobType=feynman_evaluation", {
          token: admin
        })
        expect(failedList.status).toBe(200)
        expect(failedList.text).toContain(job.jobId)

        const retried = yield* api.request("POST", `/admin-api/ai/jobs/${job.jobId}/retry`, { token: admin })
        expect(retried.status).toBe(201)
        expect(retried.body).toMatchObject({
          jobType: "feynman_evaluation",
          lifecycleStatus: "queued",
          userId: "mysql-user-5"
        })

        const counts = yield* api.request("GET", "/admin-api/ai/outbox", { token: admin })
        expect(counts.status).toBe(200)
        expect(counts.body).toMatchObject({ pending: expect.any(Number), dead: 0 })
        const workers = yield* api.request("GET", "/admin-api/ai/workers", { token: admin })
        expect(workers.body).toEqual({ workers: [] })

        for (const path of ["/admin-api/ai/jobs", "/admin-api/ai/outbox", "/admin-api/ai/workers"]) {
          expect((yield* api.request("GET", path, { token: user })).status).toBe(403)
        }
      }))

    it.effect("credentials: store encrypted, jobs use the key, the runtime resolves it, revoke", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const token = yield* tokenFor("mysql-user-6")
        const apiKey = "sk-mysql-test-key-0123456789"
        const stored = yield* api.request("PUT", "/api/ai/credentials/deepseek", { token, body: { apiKey } })
        expect(stored.status).toBe(200)
        expect(stored.text).not.toContain(apiKey)
        const credentialId = (yield* bodyAs(Schema.Struct({ credentialId: Schema.String }))(stored)).credentialId
        const job = yield* bodyAs(JobBody)(
          yield* api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() })
        )
        const resolved = yield* api.request("POST", `/internal/credentials/${credentialId}/resolve`, {
          token: runtimeToken,
          body: { jobId: job.jobId }
        })
        expect(resolved.body).toEqual({ credentialId, provider: "deepseek", apiKey })
        expect((yield* api.request("DELETE", "/api/ai/credentials/deepseek", { token })).status).toBe(204)
        const after = yield* api.request("POST", `/internal/credentials/${credentialId}/resolve`, {
          token: runtimeToken,
          body: { jobId: job.jobId }
        })
        expect(after.status).toBe(404)
      }))
  }
)

layer(apiLayer(mysqlEngine("http_quota", { maxActiveJobsPerUser: 5, dailyJobQuota: 8 })), {
  excludeTestServices: true,
  ...timeout
})(
  "limits on MySQL",
  (it) => {
    it.effect("20 parallel creates with MAX_ACTIVE_JOBS_PER_USER=5 accept exactly 5", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const token = yield* tokenFor("quota-user-1")
        const responses = yield* Effect.forEach(
          Array.from({ length: 20 }, (_, i) => i),
          (i) =>
            i % 2 === 0
              ? api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() })
              : api.request("POST", "/api/ai/feynman-evaluations", { token, body: feynmanBody() }),
          { concurrency: "unbounded" }
        )
        expect(responses.filter((r) => r.status === 202)).toHaveLength(5)
        const refused = responses.filter((r) => r.status === 429)
        expect(refused).toHaveLength(15)
        for (const r of refused) expect(r.body).toMatchObject({ code: "TOO_MANY_JOBS" })
      }))

    it.effect("DAILY_JOB_QUOTA=8: the ninth job of the day is 429 QUOTA_EXCEEDED", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const token = yield* tokenFor("quota-user-2")
        for (let i = 0; i < 8; i++) {
          const created = yield* api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() })
          expect(created.status, created.text).toBe(202)
          const job = yield* bodyAs(JobBody)(created)
          yield* api.request("POST", `/api/ai/jobs/${job.jobId}/cancel`, { token })
        }
        const over = yield* api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() })
        expect(over.status).toBe(429)
        expect(over.body).toMatchObject({ code: "QUOTA_EXCEEDED" })
      }))
  }
)

const deadRedisProbe = ReadinessProbeLive.pipe(Layer.provide(deadRedisLayer(uniqueRedisPrefix("http_dead"))))

layer(apiLayer(mysqlEngine("http_dead"), { probe: deadRedisProbe }), { excludeTestServices: true, ...timeout })(
  "Redis unreachable",
  (it) => {
    it.effect("/readyz is 503 naming redis, and creates are 503 PLATFORM_UNAVAILABLE with nothing written", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const ready = yield* api.request("GET", "/readyz")
        expect(ready.status).toBe(503)
        expect(ready.body).toMatchObject({ code: "PLATFORM_UNAVAILABLE", message: "not ready: redis does not answer" })
        const token = yield* tokenFor("dead-user")
        const created = yield* api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() })
        expect(created.status).toBe(503)
        expect(created.body).toMatchObject({ code: "PLATFORM_UNAVAILABLE" })
        expect(yield* countRows("ai_job")).toBe(0)
      }))
  }
)
