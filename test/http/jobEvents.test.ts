import { FetchHttpClient } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, Duration, Effect, Fiber, Layer, Schedule, Stream } from "effect"
import { JobNotFoundError } from "../../src/http/ApiErrors.js"
import { type JobStatusEvent, jobStatusStream, makeAiJobClient } from "../../src/http/client.js"
import { SyntheticGatewayControl } from "../../src/layers/gateway/SyntheticGateway.js"
import { memoryEngineStack, startEngine } from "../support/engineStack.js"
import { makeSigningKey, signWith, startIdentityProvider } from "../support/identityProvider.js"
import { LogCapture, LogCaptureLayer } from "../support/logCapture.js"
import {
  bodyAs,
  ErrorBody,
  flashcardBody,
  JobBody,
  jwtSecret,
  memoryEngine,
  startApi,
  tokenFor
} from "./support/harness.js"

/**
 * Following a job live (docs/architecture.md §15.5) on the memory stack: the SSE stream and the
 * long poll, through the typed client, with the real engine running jobs on the synthetic provider.
 */
const setup = Effect.gen(function*() {
  const engine = yield* Layer.build(
    memoryEngineStack({ timing: { jobHeartbeatInterval: Duration.millis(50), jobLockTtl: Duration.millis(5_000) } })
  )
  const api = yield* startApi(Layer.succeedContext(engine))
  // Each provider call takes 600 ms: long enough for several heartbeats to report progress.
  yield* Effect.provide(
    Effect.flatMap(
      SyntheticGatewayControl,
      (control) =>
        control.script(Array.from({ length: 4 }, () => ({ _tag: "Delay" as const, duration: Duration.millis(600) })))
    ),
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
      jobStatusStream({
        baseUrl: api.baseUrl,
        token: options.token ?? token,
        jobId: created.jobId,
        lastEventId: options.lastEventId
      })
  }
})

const statuses = (events: ReadonlyArray<JobStatusEvent>) => events.map((event) => event.status.lifecycleStatus)

describe("following a job live (memory stack)", () => {
  it.live(
    "the stream sends queued, running with rising progress, then succeeded, and closes",
    () =>
      Effect.gen(function*() {
        const live = yield* setup
        const sawQueued = yield* Deferred.make<void>()
        const reader = yield* live.stream().pipe(
          Stream.tap((
            event
          ) => (event.status.lifecycleStatus === "queued" ? Deferred.succeed(sawQueued, undefined) : Effect.void)),
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
      }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)),
    { timeout: 30_000 }
  )

  it.live(
    "a reconnect with Last-Event-ID after `running` still gets the terminal status; after it, 204 ends the stream",
    () =>
      Effect.gen(function*() {
        const live = yield* setup
        yield* live.startEngine
        const first = yield* live.stream().pipe(
          Stream.takeUntil((event) => event.status.lifecycleStatus === "running"),
          Stream.runCollect
        )
        const lastSeen = Chunk.toReadonlyArray(first).at(-1)
        expect(lastSeen?.status.lifecycleStatus).toBe("running")
        // Disconnected: the job ends meanwhile.
        const ended = yield* live.client.jobs.getJob({
          path: { jobId: live.jobId },
          urlParams: { waitFor: "terminal", timeoutMs: 10_000 }
        })
        expect(ended.lifecycleStatus).toBe("succeeded")

        const resumed = Chunk.toReadonlyArray(yield* Stream.runCollect(live.stream({ lastEventId: lastSeen?.id })))
        expect(statuses(resumed)).toEqual(["succeeded"])
        const afterEnd = yield* Stream.runCollect(live.stream({ lastEventId: resumed[0]?.id }))
        expect(Chunk.size(afterEnd)).toBe(0)
      }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)),
    { timeout: 30_000 }
  )

  it.live("another user's token gets 404 on the stream and on the long poll", () =>
    Effect.gen(function*() {
      const live = yield* setup
      const stranger = yield* tokenFor("someone-else")
      const refused = yield* Effect.flip(Stream.runCollect(live.stream({ token: stranger })))
      expect(refused._tag === "JobEventStreamRefused" && refused.status).toBe(404)
      const strangerClient = yield* makeAiJobClient({ baseUrl: live.api.baseUrl, token: stranger })
      const poll = yield* Effect.flip(
        strangerClient.jobs.getJob({
          path: { jobId: live.jobId },
          urlParams: { waitFor: "terminal", timeoutMs: 5_000 }
        })
      )
      expect(poll).toBeInstanceOf(JobNotFoundError)
    }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)), { timeout: 30_000 })

  it.live(
    "the long poll answers at the terminal state, well before its timeout; without a change it answers at the timeout",
    () =>
      Effect.gen(function*() {
        const live = yield* setup
        const started = Date.now()
        const waited = yield* live.client.jobs.getJob({
          path: { jobId: live.jobId },
          urlParams: { waitFor: "terminal", timeoutMs: 400 }
        })
        expect(waited.lifecycleStatus).toBe("queued")
        expect(Date.now() - started).toBeGreaterThanOrEqual(350)

        const poll = yield* live.client.jobs.getJob({
          path: { jobId: live.jobId },
          urlParams: { waitFor: "terminal", timeoutMs: 20_000 }
        }).pipe(
          Effect.timed,
          Effect.fork
        )
        yield* live.startEngine
        const [took, done] = yield* Fiber.join(poll)
        expect(done.lifecycleStatus).toBe("succeeded")
        expect(Duration.toMillis(took)).toBeLessThan(5_000)
      }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)),
    { timeout: 30_000 }
  )
})

/** A raw SSE request: the answer's status and headers, and its body read to the end (or until `timeout`). */
const openStream = (baseUrl: string, token: string, jobId: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const controller = new AbortController()
      const response = await fetch(`${baseUrl}/api/ai/jobs/${jobId}/events`, {
        headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" },
        signal: controller.signal
      })
      return { response, controller }
    }),
    ({ controller }) => Effect.sync(() => controller.abort())
  ).pipe(
    Effect.map(({ controller, response }) => {
      const reader = response.body?.getReader()
      const decoder = new TextDecoder()
      let text = ""
      return {
        status: response.status,
        headers: response.headers,
        /** Reads until `pattern` appears in what was received. */
        readUntil: (pattern: RegExp) =>
          Effect.promise(async () => {
            while (reader !== undefined && !pattern.test(text)) {
              const { done, value } = await reader.read()
              if (done) break
              text += decoder.decode(value, { stream: true })
            }
            return text
          }),
        /** Reads to the end of the body: what a client sees when the server closes the stream. */
        readToEnd: Effect.promise(async () => {
          while (reader !== undefined) {
            const { done, value } = await reader.read()
            if (done) break
            text += decoder.decode(value, { stream: true })
          }
          return text
        }),
        close: Effect.sync(() => controller.abort())
      }
    })
  )

const audience = "ai-job-engine"
const providerKey = makeSigningKey("ES256", "ec-live")

/** An API with the test secret and a local identity provider, a queued job of `owner`, and its memory engine (no worker). */
const liveApi = (options: Pick<Parameters<typeof startApi>[1] & object, "liveStreams"> = {}) =>
  Effect.gen(function*() {
    const idp = yield* startIdentityProvider([providerKey])
    const api = yield* startApi(memoryEngine(), {
      ...options,
      auth: { jwtSecret, identityProvider: { issuer: idp.issuer, audiences: [audience] } }
    })
    const create = (token: string) =>
      Effect.flatMap(
        api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() }),
        bodyAs(JobBody)
      )
    const providerToken = (sub: string, expiresInSeconds: number) =>
      signWith(providerKey, {
        iss: idp.issuer,
        aud: audience,
        sub,
        exp: Math.floor(Date.now() / 1000) + expiresInSeconds
      })
    return { api, create, providerToken }
  })

const endsWithin = <A, E, R>(effect: Effect.Effect<A, E, R>, limit: Duration.DurationInput) =>
  effect.pipe(
    Effect.timed,
    Effect.timeoutFail({ duration: limit, onTimeout: () => new Error(`still open after ${Duration.format(limit)}`) })
  )

describe("live streams are bounded", () => {
  it.live(
    "a stream ends when its token expires, HS256 and provider tokens alike, with a closing comment",
    () =>
      Effect.gen(function*() {
        const live = yield* liveApi()
        const owner = yield* tokenFor("expiring-user", "USER", 2)
        const job = yield* live.create(owner)
        const tokens = [owner, yield* live.providerToken("expiring-user", 2)]
        const streams = yield* Effect.forEach(tokens, (token) => openStream(live.api.baseUrl, token, job.jobId))
        for (const stream of streams) expect(stream.status).toBe(200)
        const ended = yield* Effect.forEach(streams, (stream) => endsWithin(stream.readToEnd, "6 seconds"), {
          concurrency: "unbounded"
        })
        for (const [, text] of ended) {
          expect(text).toContain("event: status")
          expect(text).toContain("\"lifecycleStatus\":\"queued\"")
          expect(text).toMatch(/: stream closed \(token expired\); reconnect with Last-Event-ID\n\n$/)
        }
        // The expired token opens nothing more.
        expect((yield* live.api.request("GET", `/api/ai/jobs/${job.jobId}/events`, { token: owner })).status).toBe(401)
      }).pipe(Effect.scoped),
    { timeout: 20_000 }
  )

  it.live(
    "a stream ends after SSE_MAX_DURATION_MS; the long poll answers when its token expires",
    () =>
      Effect.gen(function*() {
        const live = yield* liveApi({ liveStreams: { maxDuration: Duration.millis(400) } })
        const token = yield* tokenFor("long-lived-user")
        const job = yield* live.create(token)
        const stream = yield* openStream(live.api.baseUrl, token, job.jobId)
        const [took, text] = yield* endsWithin(stream.readToEnd, "5 seconds")
        expect(Duration.toMillis(took)).toBeGreaterThanOrEqual(300)
        expect(text).toMatch(/: stream closed \(SSE_MAX_DURATION_MS reached\)/)

        const expiring = yield* live.providerToken("long-lived-user", 2)
        const [waited, poll] = yield* endsWithin(
          live.api.request("GET", `/api/ai/jobs/${job.jobId}?waitFor=terminal&timeoutMs=25000`, { token: expiring }),
          "6 seconds"
        )
        expect(poll.status).toBe(200)
        expect((yield* bodyAs(JobBody)(poll)).lifecycleStatus).toBe("queued")
        expect(Duration.toMillis(waited)).toBeLessThan(5_000)
      }).pipe(Effect.scoped),
    { timeout: 20_000 }
  )

  it.live(
    "streams and long polls are capped per user and per process: 429 TOO_MANY_STREAMS with Retry-After, logged; a closed stream frees its slot",
    () =>
      Effect.gen(function*() {
        const live = yield* liveApi({ liveStreams: { maxPerUser: 2, maxPerProcess: 3 } })
        const [alice, bob, carol] = yield* Effect.all([tokenFor("alice"), tokenFor("bob"), tokenFor("carol")])
        const aliceJob = yield* live.create(alice)
        const bobJob = yield* live.create(bob)
        const carolJob = yield* live.create(carol)
        const open = (token: string, jobId: string) =>
          Effect.tap(openStream(live.api.baseUrl, token, jobId), (stream) =>
            stream.status === 200 ? stream.readUntil(/event: status/) : Effect.void)
        const refusedWith = (status: number, headers: Headers, text: string) =>
          Effect.sync(() => {
            expect(status).toBe(429)
            expect(headers.get("retry-after")).toBe("5")
            expect(JSON.parse(text)).toMatchObject({ code: "TOO_MANY_STREAMS" })
          })

        const first = yield* open(alice, aliceJob.jobId)
        yield* open(alice, aliceJob.jobId)
        const third = yield* open(alice, aliceJob.jobId)
        yield* refusedWith(third.status, third.headers, yield* third.readToEnd)
        const poll = yield* live.api.request("GET", `/api/ai/jobs/${aliceJob.jobId}?waitFor=terminal&timeoutMs=100`, {
          token: alice
        })
        yield* refusedWith(poll.status, poll.headers, poll.text)
        expect((yield* bodyAs(ErrorBody)(poll)).message).toContain("2 live streams")
        // A plain read is no live stream: it is never refused.
        expect((yield* live.api.request("GET", `/api/ai/jobs/${aliceJob.jobId}`, { token: alice })).status).toBe(200)

        const bobs = yield* open(bob, bobJob.jobId)
        expect(bobs.status).toBe(200)
        const carols = yield* open(carol, carolJob.jobId)
        yield* refusedWith(carols.status, carols.headers, yield* carols.readToEnd)

        // Alice closes one: the server gives its slot back once it sees the connection go.
        yield* first.close
        const reopened = yield* open(alice, aliceJob.jobId).pipe(
          Effect.flatMap((stream) => (stream.status === 200 ? Effect.succeed(stream) : Effect.fail(stream.status))),
          Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 40 })
        )
        expect(reopened.status).toBe(200)

        const lines = yield* Effect.flatMap(LogCapture, (capture) =>
          capture.lines)
        expect(lines.some((line) =>
          line.includes("live stream refused: the per-user cap is reached") && line.includes("SSE_MAX_PER_USER")
        )).toBe(true)
        expect(lines.some((line) =>
          line.includes("live stream refused: the per-process cap is reached") && line.includes("limit=3")
        )).toBe(true)
      }).pipe(Effect.scoped, Effect.provide(LogCaptureLayer)),
    { timeout: 20_000 }
  )
})
