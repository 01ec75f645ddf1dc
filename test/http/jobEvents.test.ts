import { FetchHttpClient } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, Duration, Effect, Fiber, Layer, Stream } from "effect"
import { JobNotFoundError } from "../../src/http/ApiErrors.js"
import { makeAiJobClient, jobStatusStream, type JobStatusEvent } from "../../src/http/client.js"
import { SyntheticGatewayControl } from "../../src/layers/gateway/SyntheticGateway.js"
import { memoryEngineStack, startEngine } from "../support/engineStack.js"
import { flashcardBody, startApi, tokenFor } from "./support/harness.js"

/**
 * Following a job live (docs/architecture.md §15.5) on the memory stack: the SSE stream and the
 * long poll, through the typed client, with the real engine running jobs on the synthetic provider.
 */
const setup = Effect.gen(function* () {
  const engine = yield* Layer.build(memoryEngineStack({ timing: { jobHeartbeatMs: 50, jobLockTtlMs: 5_000 } }))
  const api = yield* startApi(Layer.succeedContext(engine))
  // Each provider call takes 600 ms: long enough for several heartbeats to report progress.
  yield* Effect.provide(
    Effect.flatMap(SyntheticGatewayControl, (control) => control.script(Array.from({ length: 4 }, () => ({ _tag: "Delay" as const, ms: 600 })))),
    engine
  )
  const token = yield* tokenFor("live-user")
  const client = yield* makeAiJobClient({ baseUrl: api.baseUrl, token })
  const created = yield* client.jobs.createFlashcardGeneration({ payload: flashcardBody(), headers: {} })
  return {
    api,
    token,
    client,
    jobId: created.jobId,
    startEngine: Effect.provide(startEngine(), engine),
    stream: (options: { readonly token?: string; readonly lastEventId?: string } = {}) =>
      jobStatusStream({ baseUrl: api.baseUrl, token: options.token ?? token, jobId: created.jobId, lastEventId: options.lastEventId })
  }
})

const statuses = (events: ReadonlyArray<JobStatusEvent>) => events.map((event) => event.status.lifecycleStatus)

describe("following a job live (memory stack)", () => {
  it.live("the stream sends queued, running with rising progress, then succeeded, and closes", () =>
    Effect.gen(function* () {
      const live = yield* setup
      const sawQueued = yield* Deferred.make<void>()
      const reader = yield* live.stream().pipe(
        Stream.tap((event) => (event.status.lifecycleStatus === "queued" ? Deferred.succeed(sawQueued, undefined) : Effect.void)),
        Stream.runCollect,
        Effect.fork
      )
      yield* Deferred.await(sawQueued)
      yield* live.startEngine
      const events = Chunk.toReadonlyArray(yield* Fiber.join(reader).pipe(Effect.timeout("10 seconds")))

      expect(statuses(events)[0]).toBe("queued")
      expect(statuses(events).at(-1)).toBe("succeeded")
      expect(new Set(statuses(events.slice(1, -1)))).toEqual(new Set(["running"]))
      const progress = events.map((event) => event.status.progress)
      expect(progress).toEqual([...progress].sort((a, b) => a - b))
      // Locked (5), then the provider call under way (20) reported by a heartbeat, then 100.
      expect(progress).toContain(5)
      expect(progress.some((value) => value > 5 && value < 100)).toBe(true)
      expect(events.at(-1)?.status.progress).toBe(100)
      expect(events.at(-1)?.status.result?.artifactCount).toBeGreaterThan(0)
      // Each event's id is its state; no state is sent twice.
      expect(new Set(events.map((event) => event.id)).size).toBe(events.length)
    }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)), { timeout: 30_000 })

  it.live("a reconnect with Last-Event-ID after `running` still gets the terminal status; after it, 204 ends the stream", () =>
    Effect.gen(function* () {
      const live = yield* setup
      yield* live.startEngine
      const first = yield* live.stream().pipe(
        Stream.takeUntil((event) => event.status.lifecycleStatus === "running"),
        Stream.runCollect
      )
      const lastSeen = Chunk.toReadonlyArray(first).at(-1)
      expect(lastSeen?.status.lifecycleStatus).toBe("running")
      // Disconnected: the job ends meanwhile.
      const ended = yield* live.client.jobs.getJob({ path: { jobId: live.jobId }, urlParams: { waitFor: "terminal", timeoutMs: 10_000 } })
      expect(ended.lifecycleStatus).toBe("succeeded")

      const resumed = Chunk.toReadonlyArray(yield* Stream.runCollect(live.stream({ lastEventId: lastSeen?.id })))
      expect(statuses(resumed)).toEqual(["succeeded"])
      const afterEnd = yield* Stream.runCollect(live.stream({ lastEventId: resumed[0]?.id }))
      expect(Chunk.size(afterEnd)).toBe(0)
    }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)), { timeout: 30_000 })

  it.live("another user's token gets 404 on the stream and on the long poll", () =>
    Effect.gen(function* () {
      const live = yield* setup
      const stranger = yield* tokenFor("someone-else")
      const refused = yield* Effect.flip(Stream.runCollect(live.stream({ token: stranger })))
      expect(refused._tag === "JobEventStreamRefused" && refused.status).toBe(404)
      const strangerClient = yield* makeAiJobClient({ baseUrl: live.api.baseUrl, token: stranger })
      const poll = yield* Effect.flip(
        strangerClient.jobs.getJob({ path: { jobId: live.jobId }, urlParams: { waitFor: "terminal", timeoutMs: 5_000 } })
      )
      expect(poll).toBeInstanceOf(JobNotFoundError)
    }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)), { timeout: 30_000 })

  it.live("the long poll answers at the terminal state, well before its timeout; without a change it answers at the timeout", () =>
    Effect.gen(function* () {
      const live = yield* setup
      const started = Date.now()
      const waited = yield* live.client.jobs.getJob({ path: { jobId: live.jobId }, urlParams: { waitFor: "terminal", timeoutMs: 400 } })
      expect(waited.lifecycleStatus).toBe("queued")
      expect(Date.now() - started).toBeGreaterThanOrEqual(350)

      const poll = yield* live.client.jobs.getJob({ path: { jobId: live.jobId }, urlParams: { waitFor: "terminal", timeoutMs: 20_000 } }).pipe(
        Effect.timed,
        Effect.fork
      )
      yield* live.startEngine
      const [took, done] = yield* Fiber.join(poll)
      expect(done.lifecycleStatus).toBe("succeeded")
      expect(Duration.toMillis(took)).toBeLessThan(5_000)
    }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)), { timeout: 30_000 })
})
