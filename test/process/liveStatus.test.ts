import { FetchHttpClient } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, Fiber, Stream } from "effect"
import { JobNotFoundError } from "../../src/http/ApiErrors.js"
import { type JobStatusEvent, jobStatusStream, makeAiJobClient } from "../../src/http/client.js"
import { startLimitedFakeProvider } from "../support/limitedFakeProvider.js"
import {
  dispatcherStarted,
  engineEnv,
  engineStorage,
  flashcardRequest,
  startProgram,
  tokenFor,
  workerStarted
} from "./support/engine.js"
import { restrictedEngineUser, startRedisServer } from "./support/redisServer.js"

const flashcards = JSON.stringify({ flashcards: [{ front: "What does chlorophyll absorb?", back: "Light." }] })

describe("issue 16: following a job live across processes (MySQL + Redis)", () => {
  it.live(
    "API, dispatcher and worker apart, under the Redis ACL rule: the SSE stream, a reconnect, a stranger and the long poll",
    () =>
      Effect.gen(function*() {
        // A private Redis whose engine user has exactly the documented ACL rule: live status must
        // need nothing more (its job-events pattern subscription included).
        const redis = yield* startRedisServer()
        const unrestricted = yield* engineStorage("live_status", { redisUrl: redis.url })
        const acl = yield* restrictedEngineUser(redis, unrestricted.redisPrefix)
        const storage = { ...unrestricted, redisUrl: acl.url }
        // Each provider call takes about 1.5 s; heartbeats every 200 ms carry the progress meanwhile.
        const provider = yield* startLimitedFakeProvider({
          latency: { medianMs: 1_500, p99Ms: 1_600 },
          content: () => flashcards
        })
        const env = engineEnv(storage, {
          AI_GATEWAY: "openai",
          AI_BASE_URL: provider.baseUrl,
          AI_API_KEY: provider.apiKey,
          JOB_HEARTBEAT_MS: "200"
        })
        const [api] = yield* Effect.all(
          [
            startProgram("api", "api", env),
            startProgram("dispatcher", "dispatcher", env, { ready: dispatcherStarted })
          ],
          { concurrency: "unbounded" }
        )
        const token = yield* tokenFor(storage, "live-user")
        const client = yield* makeAiJobClient({ baseUrl: api.baseUrl, token })
        const create = client.jobs.createFlashcardGeneration({ payload: flashcardRequest(1), headers: {} })
        const stream = (jobId: string, options: { readonly token?: string; readonly lastEventId?: string } = {}) =>
          jobStatusStream({
            baseUrl: api.baseUrl,
            token: options.token ?? token,
            jobId,
            lastEventId: options.lastEventId
          })
        const statuses = (events: ReadonlyArray<JobStatusEvent>) => events.map((event) => event.status.lifecycleStatus)

        // 1. A whole run seen on the stream; the worker starts only once the client saw `queued`.
        const first = yield* create
        const sawQueued = yield* Deferred.make<void>()
        const reader = yield* stream(first.jobId).pipe(
          Stream.tap((
            event
          ) => (event.status.lifecycleStatus === "queued" ? Deferred.succeed(sawQueued, undefined) : Effect.void)),
          Stream.runCollect,
          Effect.fork
        )
        yield* Deferred.await(sawQueued)
        yield* startProgram("worker", "worker", env, { ready: workerStarted })
        const events = Chunk.toReadonlyArray(yield* Fiber.join(reader).pipe(Effect.timeout("30 seconds")))
        expect(statuses(events)[0]).toBe("queued")
        expect(statuses(events).at(-1)).toBe("succeeded")
        expect(new Set(statuses(events.slice(1, -1)))).toEqual(new Set(["running"]))
        const progress = events.map((event) => event.status.progress)
        expect(progress).toEqual([...progress].sort((a, b) => a - b))
        expect(progress.filter((value) => value > 0 && value < 100).length).toBeGreaterThanOrEqual(2)
        expect(events.at(-1)?.status.progress).toBe(100)

        // 2. Disconnect after `running`, reconnect with Last-Event-ID once the job ended.
        const second = yield* create
        const beforeEnd = Chunk.toReadonlyArray(
          yield* stream(second.jobId).pipe(
            Stream.takeUntil((event) => event.status.lifecycleStatus === "running"),
            Stream.runCollect
          )
        )
        expect(statuses(beforeEnd).at(-1)).toBe("running")

        // 3. The long poll returns on the terminal state, well before its timeout.
        const started = Date.now()
        const ended = yield* client.jobs.getJob({
          path: { jobId: second.jobId },
          urlParams: { waitFor: "terminal", timeoutMs: 30_000 }
        })
        expect(ended.lifecycleStatus).toBe("succeeded")
        expect(Date.now() - started).toBeLessThan(15_000)

        const resumed = Chunk.toReadonlyArray(
          yield* Stream.runCollect(stream(second.jobId, { lastEventId: beforeEnd.at(-1)?.id }))
        )
        expect(statuses(resumed)).toEqual(["succeeded"])

        // 4. Another user's token: 404 on the stream and on the long poll.
        const stranger = yield* tokenFor(storage, "someone-else")
        const refused = yield* Effect.flip(Stream.runCollect(stream(second.jobId, { token: stranger })))
        expect(refused._tag === "JobEventStreamRefused" && refused.status).toBe(404)
        const strangerClient = yield* makeAiJobClient({ baseUrl: api.baseUrl, token: stranger })
        const poll = yield* Effect.flip(
          strangerClient.jobs.getJob({
            path: { jobId: second.jobId },
            urlParams: { waitFor: "terminal", timeoutMs: 1_000 }
          })
        )
        expect(poll).toBeInstanceOf(JobNotFoundError)

        // Nothing any process sent was refused by the rule.
        expect(yield* acl.refusals).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)),
    { timeout: 120_000 }
  )
})
