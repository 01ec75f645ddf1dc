import { describe, expect, it } from "@effect/vitest"
import { Effect, HashMap, Option } from "effect"
import { MemoryDatabase } from "../../src/layers/memory/MemoryDatabase.js"
import { memoryCheck, readinessProbeWith } from "../../src/services/ReadinessProbe.js"
import {
  bodyAs,
  ErrorBody,
  feynmanBody,
  flashcardBody,
  JobBody,
  markFailed,
  memoryEngine,
  startApi,
  tokenFor
} from "./support/harness.js"

const redisDown = readinessProbeWith(
  [memoryCheck("database"), { name: "redis", backend: "redis", ping: Effect.fail("connection refused") }]
)
const bothDown = readinessProbeWith(
  [
    { name: "database", backend: "mysql", ping: Effect.never },
    { name: "redis", backend: "redis", ping: Effect.fail("connection refused") }
  ],
  { timeout: "200 millis" }
)

const sizes = Effect.map(Effect.flatMap(MemoryDatabase, (db) => db.snapshot), (tables) => ({
  jobs: HashMap.size(tables.aiJob),
  snapshots: HashMap.size(tables.aiJobSnapshot),
  outbox: HashMap.size(tables.outboxEvent)
}))

describe("health", () => {
  it.live("/healthz is alive; /readyz is ready when every check answers", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine())
        const alive = yield* api.request("GET", "/healthz")
        expect(alive.status).toBe(200)
        expect(alive.body).toEqual({ status: "ok" })
        const ready = yield* api.request("GET", "/readyz")
        expect(ready.status).toBe(200)
        expect(ready.body).toMatchObject({
          status: "ready",
          checks: [{ name: "database", status: "up" }, { name: "queue", status: "up" }]
        })
      })
    ))

  it.live("/readyz is 503 PLATFORM_UNAVAILABLE naming what does not answer (a hang counts, after the timeout)", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const one = yield* startApi(memoryEngine(), { probe: redisDown })
        const r1 = yield* one.request("GET", "/readyz")
        expect(r1.status).toBe(503)
        expect(r1.body).toMatchObject({ code: "PLATFORM_UNAVAILABLE", message: "not ready: redis does not answer" })
        expect((yield* one.request("GET", "/healthz")).status).toBe(200)

        const two = yield* startApi(memoryEngine(), { probe: bothDown })
        const r2 = yield* two.request("GET", "/readyz")
        expect(r2.status).toBe(503)
        expect(yield* bodyAs(ErrorBody)(r2)).toEqual({
          code: "PLATFORM_UNAVAILABLE",
          message: "not ready: database and redis do not answer"
        })
      })
    ))
})

describe("platform unavailable", () => {
  it.live("AI_PLATFORM_ENABLED=false: creating AI work is 503; reading and cancelling still work", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const engine = memoryEngine()
        const api = yield* startApi(engine, { platformEnabled: false })
        const token = yield* tokenFor("user-a")
        const admin = yield* tokenFor("admin-1", "SUPER_ADMIN")
        for (
          const [path, body] of [
            ["/api/ai/flashcard-generations", flashcardBody()],
            ["/api/ai/feynman-evaluations", feynmanBody()]
          ] as const
        ) {
          const response = yield* api.request("POST", path, { token, body })
          expect(response.status).toBe(503)
          expect(yield* bodyAs(ErrorBody)(response)).toMatchObject({ code: "PLATFORM_UNAVAILABLE" })
        }
        expect(yield* api.run(sizes)).toEqual({ jobs: 0, snapshots: 0, outbox: 0 })
        expect((yield* api.request("GET", "/api/ai/jobs", { token })).status).toBe(200)

        // A job from before the switch: readable, cancellable, not retryable while off.
        const job = yield* api.run(
          Effect.gen(function*() {
            const { AiJobService } = yield* Effect.promise(() => import("../../src/services/AiJobService.js"))
            const service = yield* AiJobService
            return (yield* service.createJob({
              userId: "user-a",
              jobType: "flashcard_generation",
              targetType: "flashcard_deck",
              targetId: "unassigned",
              input: flashcardBody()
            }).pipe(Effect.orDie)).job
          })
        )
        yield* api.run(
          markFailed(job.id, {
            errorCode: "TIMEOUT",
            publicErrorMessage: "The job took too long and was stopped.",
            internalErrorMessage: "t"
          })
        )
        expect((yield* api.request("GET", `/api/ai/jobs/${job.id}`, { token })).status).toBe(200)
        const retry = yield* api.request("POST", `/admin-api/ai/jobs/${job.id}/retry`, { token: admin })
        expect(retry.status).toBe(503)
      })
    ))

  it.live("Redis unreachable: creates are 503 and write nothing", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine(), { probe: redisDown })
        const token = yield* tokenFor("user-a")
        const response = yield* api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() })
        expect(response.status).toBe(503)
        expect(yield* bodyAs(ErrorBody)(response)).toEqual({
          code: "PLATFORM_UNAVAILABLE",
          message: "The AI platform is unavailable right now. Please try again later."
        })
        expect(yield* api.run(sizes)).toEqual({ jobs: 0, snapshots: 0, outbox: 0 })
      })
    ))

  it.live("the database unreachable (PersistenceError) is 503 on every route that reads or writes, with no internal detail", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine())
        const token = yield* tokenFor("user-a")
        const admin = yield* tokenFor("admin-1", "SUPER_ADMIN")
        const job = yield* bodyAs(JobBody)(
          yield* api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() })
        )
        yield* api.run(
          Effect.flatMap(
            MemoryDatabase,
            (db) =>
              db.setFaults(Option.some(() => Effect.succeed(Option.some("ECONNREFUSED 10.1.2.3:3306 /var/lib/mysql"))))
          )
        )
        const routes: ReadonlyArray<readonly [string, string, string, unknown?]> = [
          ["POST", "/api/ai/flashcard-generations", token, flashcardBody()],
          ["GET", "/api/ai/jobs", token],
          ["GET", `/api/ai/jobs/${job.jobId}`, token],
          ["GET", `/api/ai/jobs/${job.jobId}/artifacts`, token],
          ["POST", `/api/ai/jobs/${job.jobId}/cancel`, token],
          ["PUT", "/api/ai/credentials/deepseek", token, { apiKey: "sk-abc" }],
          ["GET", "/admin-api/ai/jobs", admin],
          ["GET", `/admin-api/ai/jobs/${job.jobId}`, admin],
          ["GET", "/admin-api/ai/outbox", admin]
        ]
        for (const [method, path, bearer, body] of routes) {
          const response = yield* api.request(method, path, { token: bearer, body })
          expect(response.status, `${method} ${path}: ${response.text}`).toBe(503)
          expect(yield* bodyAs(ErrorBody)(response)).toMatchObject({ code: "PLATFORM_UNAVAILABLE" })
          expect(response.text).not.toMatch(/ECONNREFUSED|10\.1\.2\.3|\/var\/lib/)
        }
        yield* api.run(Effect.flatMap(MemoryDatabase, (db) => db.setFaults(Option.none())))
        expect((yield* api.request("GET", `/api/ai/jobs/${job.jobId}`, { token })).status).toBe(200)
      })
    ))
})

describe("writing handlers are uninterruptible", () => {
  it.live("a client that hangs up mid-create leaves a whole job (job, snapshot and outbox event), not half of one", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine())
        const token = yield* tokenFor("user-a")
        // The client hangs up the moment the create transaction commits (the commit is held a
        // second), so the hang-up lands inside the transaction whatever the machine's load.
        const controller = new AbortController()
        yield* api.run(
          Effect.flatMap(MemoryDatabase, (db) =>
            db.setFaults(
              Option.some((operation) =>
                operation === "commit"
                  ? Effect.as(
                    Effect.zipRight(Effect.sync(() => controller.abort()), Effect.sleep("1 second")),
                    Option.none()
                  )
                  : Effect.succeed(Option.none())
              )
            ))
        )
        const aborted = yield* Effect.promise(() =>
          fetch(`${api.baseUrl}/api/ai/flashcard-generations`, {
            method: "POST",
            headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
            body: JSON.stringify(flashcardBody()),
            signal: controller.signal
          }).then(
            () => false,
            () => true
          )
        )
        expect(aborted).toBe(true)
        yield* Effect.sleep("1500 millis")
        expect(yield* api.run(sizes)).toEqual({ jobs: 1, snapshots: 1, outbox: 1 })
      })
    ))
})
