/**
 * `npm run bench:sse`: many concurrent Server-Sent Event streams on one API process
 * (docs/architecture.md §15.5). The API runs alone in a child process (bench/httpServer.ts,
 * `engine` mode: the real HttpApi on the production layers, MySQL + Redis, so job events arrive
 * through Redis pub/sub). This process creates `BENCH_SSE_JOBS` jobs, opens `BENCH_SSE_STREAMS`
 * streams spread over them with the typed client's `jobStatusStream`, then moves every job
 * queued → running → progress … → succeeded the way a worker does (a fenced write, then the job
 * event on Redis) and measures:
 * - memory per open stream: the API process's RSS and heap (after GC) with every stream open,
 *   less the same before any was opened, divided by the streams;
 * - delivery latency: from the publish of a job's event (after its commit) to the status frame
 *   arriving on a stream (both clocks in this process);
 * - that every stream received the terminal status and then closed;
 * - the caps (docs/architecture.md §15.5): the streams belong to as many users as the per-user cap
 *   (`SSE_MAX_PER_USER`, the default unless set) needs, the per-process cap is the stream count
 *   plus a few; with every stream open, one user opens streams until refused, then other users
 *   until the process refuses: each refusal must be a 429 with Retry-After at exactly its cap.
 * Beside it, the baseline: a bare `node:http` server (no Effect, no auth) holding as many streams,
 * each after one status frame, measured the same way.
 * Prints the figures and writes bench/results/sse.json.
 *
 * Each open stream is a socket on both sides: the file descriptor limit (`ulimit -n`) must exceed
 * the stream count with room to spare; the bench says so and stops when it does not.
 */
import { FetchHttpClient } from "@effect/platform"
import { NodeRuntime } from "@effect/platform-node"
import { Config, Deferred, Duration, Effect, Fiber, Logger, LogLevel, Option, Redacted, Schema, Stream } from "effect"
import { mkdir, readFile, writeFile } from "node:fs/promises"
import { type ClientRequest, get } from "node:http"
import { availableParallelism, loadavg } from "node:os"
import { fileURLToPath } from "node:url"
import { defaultLiveStreams } from "../src/config/LiveStreamSettings.js"
import { type AiJob, leaseOf } from "../src/domain/AiJob.js"
import { signToken } from "../src/http/AuthTokens.js"
import { jobStatusStream } from "../src/http/client.js"
import { AiJobLifecycleRepository } from "../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../src/services/AiJobService.js"
import { jobEventOf, JobEvents } from "../src/services/JobEvents.js"
import { benchChild } from "./childProcess.js"
import { benchEngineLayer, benchJwtSecret } from "./engineStack.js"
import { HttpServerReady } from "./httpProtocol.js"
import { monoMillis, redisNamespace, scratchDatabase } from "./infra.js"
import { MemoryReading } from "./memoryProtocol.js"
import { round, summarize } from "./stats.js"

const resultsFile = fileURLToPath(new URL("./results/sse.json", import.meta.url))
const step = (label: string) => Effect.sync(() => process.stderr.write(`bench:sse: ${label}\n`))

const settings = Config.all({
  serverUrl: Config.string("BENCH_DATABASE_URL").pipe(Config.withDefault("mysql://root@127.0.0.1:3306/test")),
  redisUrl: Config.string("BENCH_REDIS_URL").pipe(Config.withDefault("redis://127.0.0.1:6379")),
  streams: Config.integer("BENCH_SSE_STREAMS").pipe(Config.withDefault(1_000)),
  jobs: Config.integer("BENCH_SSE_JOBS").pipe(Config.withDefault(1_000)),
  /** Progress reports per job between `running` and `succeeded`. */
  progressSteps: Config.integer("BENCH_SSE_PROGRESS_STEPS").pipe(Config.withDefault(3)),
  /** Writes (each followed by its event) in flight at once while driving the jobs. */
  concurrency: Config.integer("BENCH_CONCURRENCY").pipe(Config.withDefault(16)),
  /** Streams connecting at once while they are opened. */
  openBatch: Config.integer("BENCH_SSE_OPEN_BATCH").pipe(Config.withDefault(100)),
  /** The per-user cap the API runs with (the engine's default unless set). */
  maxPerUser: Config.integer("SSE_MAX_PER_USER").pipe(Config.withDefault(defaultLiveStreams.maxPerUser))
})

/** The per-process cap is the streams measured plus this many, which the cap probe fills. */
const processCapHeadroom = 10

/** One stream opened with node:http: its status and Retry-After, held open until `close`. */
const openRaw = (baseUrl: string, token: string, jobId: string) =>
  Effect.async<{ readonly status: number; readonly retryAfter: string | undefined; readonly close: () => void }, Error>(
    (resume) => {
      const request = get(`${baseUrl}/api/ai/jobs/${encodeURIComponent(jobId)}/events`, {
        headers: { authorization: `Bearer ${token}` }
      }, (response) => {
        const retryAfter = response.headers["retry-after"]
        resume(Effect.succeed({ status: response.statusCode ?? 0, retryAfter, close: () => request.destroy() }))
      })
      request.once("error", (error) => resume(Effect.fail(error)))
    }
  )

/** Opens streams with `tokenFor(k)` until one is refused (at most `limit` tries); returns how many opened and the refusal. */
const openUntilRefused = (
  baseUrl: string,
  jobId: string,
  tokenFor: (k: number) => Effect.Effect<string>,
  limit: number
) =>
  Effect.gen(function*() {
    const opened: Array<() => void> = []
    yield* Effect.addFinalizer(() => Effect.sync(() => opened.forEach((close) => close())))
    for (let k = 0; k < limit; k++) {
      const answer = yield* openRaw(baseUrl, yield* tokenFor(k), jobId)
      if (answer.status !== 200) {
        answer.close()
        return { opened: opened.length, refusal: { status: answer.status, retryAfter: answer.retryAfter ?? null } }
      }
      opened.push(answer.close)
    }
    return { opened: opened.length, refusal: null }
  })

const ServerMessage = Schema.Union(HttpServerReady, MemoryReading)
type ServerMessage = typeof ServerMessage.Type
const isListening = (message: ServerMessage): message is HttpServerReady => message.type === "listening"
const isReading = (message: ServerMessage): message is MemoryReading => message.type === "memory"

/** This process's open-files limit, from /proc (Linux); None where that cannot be read. */
const openFilesLimit = Effect.promise(() => readFile("/proc/self/limits", "utf8").catch(() => "")).pipe(
  Effect.map((text) => Option.fromNullable(/^Max open files\s+(\d+)/m.exec(text)?.[1]).pipe(Option.map(Number)))
)

/** What one stream saw: each status's state id and when it arrived, and how it ended. */
interface StreamRecord {
  readonly jobId: string
  readonly userId: string
  readonly received: Array<{ readonly id: string; readonly atMs: number }>
  ended: "terminal" | "closed early" | "failed" | "open"
}

const mib = (bytes: number) => round(bytes / 1024 / 1024, 1)

const program = Effect.gen(function*() {
  const s = yield* settings
  const loadStart = loadavg()[0] ?? 0
  const limit = yield* openFilesLimit
  yield* step(
    `open files limit ${
      Option.getOrElse(Option.map(limit, String), () => "unknown")
    }; ${s.streams} streams on ${s.jobs} jobs`
  )
  if (Option.isSome(limit) && limit.value < s.streams + 200) {
    return yield* Effect.dieMessage(
      `ulimit -n is ${limit.value}: ${s.streams} streams need more than ${
        s.streams + 200
      } (raise it, or set BENCH_SSE_STREAMS lower)`
    )
  }

  const database = yield* scratchDatabase(s.serverUrl)
  const redisPrefix = yield* redisNamespace(s.redisUrl)
  const target = { ...database, redisUrl: s.redisUrl, redisPrefix }
  /** The API alone in a child process, for the caller's scope; `measure` reads its memory. */
  const startServer = (mode: "engine" | "bare") =>
    Effect.gen(function*() {
      const server = yield* benchChild({
        entry: "./httpServer.ts",
        args: [JSON.stringify({ mode, target, liveStreams: caps })],
        message: ServerMessage,
        exposeGc: true
      })
      const { port } = yield* server.next(isListening, 60)
      const measure = (label: string) =>
        Effect.zipRight(server.send({ type: "measure", label }), server.next(isReading, 60))
      return { baseUrl: `http://127.0.0.1:${port}`, measure }
    })
  // The streams' users: each holds at most the per-user cap (a job's streams all belong to its owner).
  const streamsPerJob = Math.ceil(s.streams / Math.max(1, s.jobs))
  if (streamsPerJob > s.maxPerUser) {
    return yield* Effect.dieMessage(
      `${streamsPerJob} streams per job exceed SSE_MAX_PER_USER ${s.maxPerUser}: raise it or BENCH_SSE_JOBS`
    )
  }
  const jobsPerUser = Math.max(1, Math.floor(s.maxPerUser / streamsPerJob))
  const userOf = (jobIndex: number) => `bench-sse-user-${Math.floor(jobIndex / jobsPerUser)}`
  const caps = { maxPerUser: s.maxPerUser, maxPerProcess: s.streams + processCapHeadroom }
  const tokens = new Map<string, string>()
  const tokenOf = (sub: string, role: "USER" | "SUPER_ADMIN" = "USER") =>
    Effect.gen(function*() {
      const known = tokens.get(sub)
      if (known !== undefined) return known
      const minted = yield* signToken({ sub, role, expiresInSeconds: 3600 }, Redacted.make(benchJwtSecret))
      tokens.set(sub, minted)
      return minted
    })

  const measured = yield* Effect.gen(function*() {
    const { baseUrl, measure } = yield* startServer("engine")
    const service = yield* AiJobService
    const repository = yield* AiJobLifecycleRepository
    const events = yield* JobEvents

    yield* step(`creating ${s.jobs} jobs`)
    const jobs = yield* Effect.forEach(
      Array.from({ length: s.jobs }, (_, i) => i),
      (i) =>
        service
          .createJob({
            userId: userOf(i),
            jobType: "synthetic_echo",
            targetType: "bench_sse",
            targetId: String(i),
            input: { message: `sse ${i}` }
          })
          .pipe(Effect.map(({ job }) => job), Effect.retry({ times: 5 }), Effect.orDie),
      { concurrency: s.concurrency }
    )

    const open = (jobId: string, token: string, record: StreamRecord, opened: Deferred.Deferred<void>) =>
      jobStatusStream({ baseUrl, token, jobId }).pipe(
        Stream.runForEach((event) =>
          Effect.flatMap(
            monoMillis,
            (atMs) =>
              Effect.sync(() => record.received.push({ id: event.id, atMs })).pipe(
                Effect.zipRight(Deferred.succeed(opened, undefined))
              )
          )
        ),
        Effect.matchEffect({
          onFailure: () =>
            Effect.sync(() => {
              record.ended = "failed"
            }),
          onSuccess: () =>
            Effect.sync(() => {
              record.ended = record.received.at(-1)?.id.startsWith("succeeded.") === true ? "terminal" : "closed early"
            })
        }),
        Effect.ensuring(Deferred.succeed(opened, undefined))
      )

    // One stream opened and closed first, so the route's code is loaded before the baseline.
    const warm: StreamRecord = { jobId: jobs[0]?.id ?? "", userId: userOf(0), received: [], ended: "open" }
    const warmOpened = yield* Deferred.make<void>()
    const warmFiber = yield* Effect.fork(open(warm.jobId, yield* tokenOf(userOf(0)), warm, warmOpened))
    yield* Deferred.await(warmOpened)
    yield* Fiber.interrupt(warmFiber)
    const before = yield* measure("before streams")

    yield* step(`opening ${s.streams} streams, ${s.openBatch} at a time`)
    const records: Array<StreamRecord> = []
    const fibers: Array<Fiber.RuntimeFiber<void>> = []
    const openStarted = yield* monoMillis
    for (let first = 0; first < s.streams; first += s.openBatch) {
      const batch = yield* Effect.forEach(
        Array.from({ length: Math.min(s.openBatch, s.streams - first) }, (_, k) => first + k),
        (i) =>
          Effect.gen(function*() {
            const job = jobs[i % jobs.length]
            if (job === undefined) return yield* Effect.dieMessage("no job to stream")
            const record: StreamRecord = { jobId: job.id, userId: userOf(i % jobs.length), received: [], ended: "open" }
            const opened = yield* Deferred.make<void>()
            records.push(record)
            fibers.push(yield* Effect.fork(open(job.id, yield* tokenOf(record.userId), record, opened)))
            return opened
          })
      )
      yield* Effect.forEach(batch, Deferred.await, { discard: true })
    }
    const openSeconds = ((yield* monoMillis) - openStarted) / 1000
    const failedToOpen = records.filter((record) => record.received.length === 0).length
    const withStreams = yield* measure("streams open")

    // The caps, with every stream open: the first job's owner until refused, then other users until the process refuses.
    yield* step(`caps: SSE_MAX_PER_USER ${caps.maxPerUser}, SSE_MAX_PER_PROCESS ${caps.maxPerProcess}`)
    const probeJob = jobs[0]?.id ?? ""
    const capProbe = yield* Effect.scoped(Effect.gen(function*() {
      const owner = userOf(0)
      const ownerHeld = records.filter((record) => record.userId === owner).length
      const perUser = yield* openUntilRefused(baseUrl, probeJob, () => tokenOf(owner), caps.maxPerUser + 1)
      const perProcess = yield* openUntilRefused(
        baseUrl,
        probeJob,
        (k) => tokenOf(`bench-sse-admin-${k}`, "SUPER_ADMIN"),
        processCapHeadroom + 1
      )
      return {
        perUser: { cap: caps.maxPerUser, refusedAtStream: ownerHeld + perUser.opened + 1, refusal: perUser.refusal },
        perProcess: {
          cap: caps.maxPerProcess,
          refusedAtStream: records.length + perUser.opened + perProcess.opened + 1,
          refusal: perProcess.refusal
        }
      }
    }))

    // Drive every job as a worker would: a fenced write, then its event, stage by stage.
    const published = new Map<string, number>()
    const announce = (job: AiJob, progress = job.progress) =>
      Effect.flatMap(monoMillis, (atMs) =>
        Effect.zipRight(
          Effect.sync(() => published.set(`${job.id} ${job.lifecycleStatus}.${progress}`, atMs)),
          events.publish({ ...jobEventOf(job), progress })
        ))
    const phase = <A>(label: string, of: ReadonlyArray<AiJob>, each: (job: AiJob) => Effect.Effect<A, unknown>) =>
      Effect.gen(function*() {
        const started = yield* monoMillis
        const out = yield* Effect.forEach(of, (job) => Effect.orDie(each(job)), { concurrency: s.concurrency })
        const seconds = ((yield* monoMillis) - started) / 1000
        yield* step(`${label}: ${of.length} writes, each then its event, in ${round(seconds, 2)} s`)
        return out
      })
    const leaseFor = (job: AiJob) =>
      Option.fromNullable(leaseOf(job)).pipe(Effect.orDieWith(() => new Error("a running job without a lease")))
    const ttlMs = 600_000
    const driveStarted = yield* monoMillis
    const running = yield* phase(
      "running",
      jobs,
      (job) =>
        Effect.tap(
          repository.lockJob(job.id, "bench-sse-worker", Duration.millis(ttlMs), 5),
          (locked) => announce(locked)
        )
    )
    for (let k = 1; k <= s.progressSteps; k++) {
      const progress = 5 + Math.round((75 * k) / s.progressSteps)
      yield* phase(
        `progress ${progress}`,
        running,
        (job) =>
          Effect.flatMap(leaseFor(job), (lease) =>
            Effect.zipRight(
              repository.extendLocks([{ lease, progress, reportCancel: false }], Duration.millis(ttlMs)),
              announce(job, progress)
            ))
      )
    }
    yield* phase(
      "succeeded",
      running,
      (job) =>
        Effect.flatMap(
          leaseFor(job),
          (lease) =>
            Effect.tap(repository.markSucceeded(lease, "0".repeat(64), { locked: job }), (done) => announce(done))
        )
    )
    const driveSeconds = ((yield* monoMillis) - driveStarted) / 1000
    const changes = jobs.length * (2 + s.progressSteps)

    // Every stream should end by itself after the terminal status; wait a little beyond a heartbeat.
    yield* Effect.forEach(fibers, Fiber.join, { discard: true }).pipe(Effect.timeoutOption("30 seconds"))
    yield* Effect.forEach(fibers, Fiber.interrupt, { discard: true })
    const afterStreams = yield* measure("streams closed")

    const latencies: Array<number> = []
    let unmatched = 0
    let statusesSeen = 0
    for (const record of records) {
      // The first status is the one read at connect time: not a delivered event.
      for (const frame of record.received.slice(1)) {
        statusesSeen++
        const publishedAt = published.get(`${record.jobId} ${frame.id}`)
        if (publishedAt === undefined) unmatched++
        else latencies.push(frame.atMs - publishedAt)
      }
    }
    const expectedPerStream = 2 + s.progressSteps
    return {
      jobIds: jobs.map((job) => job.id),
      capProbe,
      openSeconds: round(openSeconds, 2),
      failedToOpen,
      before,
      withStreams,
      afterStreams,
      driveSeconds: round(driveSeconds, 2),
      changesPerSecond: round(changes / driveSeconds, 1),
      delivery: summarize(latencies),
      statusesSeen,
      statusesExpected: records.length * expectedPerStream,
      unmatched,
      ended: {
        terminal: records.filter((record) => record.ended === "terminal").length,
        closedEarly: records.filter((record) => record.ended === "closed early").length,
        failed: records.filter((record) => record.ended === "failed").length,
        stillOpen: records.filter((record) => record.ended === "open").length
      }
    }
  }).pipe(Effect.scoped, Effect.provide(benchEngineLayer(target, { workerConcurrency: 1 })))

  // The baseline: a bare node:http server holding as many streams, each after one status frame.
  yield* step(`baseline: ${s.streams} streams held by a bare node:http server`)
  const bare = yield* Effect.gen(function*() {
    const { baseUrl, measure } = yield* startServer("bare")
    const requests: Array<ClientRequest> = []
    yield* Effect.addFinalizer(() => Effect.sync(() => requests.forEach((request) => request.destroy())))
    const openBare = (i: number) =>
      Effect.async<ClientRequest, Error>((resume) => {
        const jobId = measured.jobIds[i % measured.jobIds.length] ?? ""
        const request = get(`${baseUrl}/api/ai/jobs/${encodeURIComponent(jobId)}/events`, (response) => {
          response.once("data", () => resume(Effect.succeed(request)))
        })
        request.once("error", (error) => resume(Effect.fail(error)))
        requests.push(request)
      })
    // As for the engine: one stream first, so what the first one loads is not counted.
    const warmRequest = yield* openBare(0)
    warmRequest.destroy()
    const before = yield* measure("bare, before streams")
    for (let first = 0; first < s.streams; first += s.openBatch) {
      yield* Effect.forEach(
        Array.from({ length: Math.min(s.openBatch, s.streams - first) }, (_, k) => first + k),
        openBare,
        { concurrency: "unbounded", discard: true }
      )
    }
    const withStreams = yield* measure("bare, streams open")
    return { before, withStreams }
  }).pipe(Effect.scoped, Effect.orDie)

  const perStreamOf =
    (readings: { readonly before: MemoryReading; readonly withStreams: MemoryReading }) =>
    (key: "rssBytes" | "heapUsedBytes" | "externalBytes") =>
      round((readings.withStreams[key] - readings.before[key]) / Math.max(1, s.streams) / 1024, 1)
  const perStream = perStreamOf(measured)
  const barePerStream = perStreamOf(bare)
  const { jobIds: _jobIds, ...figures } = measured
  const results = {
    startedAt: new Date().toISOString(),
    machine: {
      cpus: availableParallelism(),
      node: process.version,
      loadAverageStart: round(loadStart, 2),
      loadAverageEnd: round(loadavg()[0] ?? 0, 2)
    },
    settings: { ...s, openFilesLimit: Option.getOrNull(limit) },
    ...figures,
    perStreamKiB: {
      rss: perStream("rssBytes"),
      heapUsed: perStream("heapUsedBytes"),
      external: perStream("externalBytes")
    },
    bare,
    barePerStreamKiB: {
      rss: barePerStream("rssBytes"),
      heapUsed: barePerStream("heapUsedBytes"),
      external: barePerStream("externalBytes")
    }
  }
  yield* Effect.promise(async () => {
    await mkdir(fileURLToPath(new URL("./results/", import.meta.url)), { recursive: true })
    await writeFile(resultsFile, JSON.stringify(results, null, 2) + "\n")
  })
  const memoryRow = (reading: MemoryReading) =>
    `| ${reading.label} | ${mib(reading.rssBytes)} | ${mib(reading.heapUsedBytes)} | ${mib(reading.externalBytes)} |`
  const lines = [
    `SSE: ${s.streams} streams on ${s.jobs} jobs, one API process (MySQL + Redis pub/sub); load average ${results.machine.loadAverageStart} → ${results.machine.loadAverageEnd} on ${results.machine.cpus} CPUs`,
    "",
    "| server process | RSS MiB | heap used MiB | external MiB |",
    "|---|---|---|---|",
    memoryRow(measured.before),
    memoryRow(measured.withStreams),
    memoryRow(measured.afterStreams),
    memoryRow(bare.before),
    memoryRow(bare.withStreams),
    "",
    `memory per open stream: RSS ${results.perStreamKiB.rss} KiB, heap ${results.perStreamKiB.heapUsed} KiB, external ${results.perStreamKiB.external} KiB` +
    ` (bare node:http baseline: RSS ${results.barePerStreamKiB.rss} KiB, heap ${results.barePerStreamKiB.heapUsed} KiB)`,
    `opened in ${measured.openSeconds} s (${measured.failedToOpen} without a first status)`,
    `driven: ${
      s.jobs * (2 + s.progressSteps)
    } status changes in ${measured.driveSeconds} s (${measured.changesPerSecond}/s)`,
    `delivery publish → client: p50 ${measured.delivery.p50Ms} ms, p99 ${measured.delivery.p99Ms} ms, max ${measured.delivery.maxMs} ms ` +
    `(${measured.delivery.count} statuses; ${measured.statusesSeen} of ${measured.statusesExpected} changes seen, the rest coalesced into a later status; ${measured.unmatched} unmatched)`,
    `caps: SSE_MAX_PER_USER ${measured.capProbe.perUser.cap}: a user's stream ${measured.capProbe.perUser.refusedAtStream} answered ` +
    `${measured.capProbe.perUser.refusal?.status ?? "200 (not refused)"} (Retry-After ${
      measured.capProbe.perUser.refusal?.retryAfter ?? "-"
    }); ` +
    `SSE_MAX_PER_PROCESS ${measured.capProbe.perProcess.cap}: stream ${measured.capProbe.perProcess.refusedAtStream} answered ` +
    `${measured.capProbe.perProcess.refusal?.status ?? "200 (not refused)"} (Retry-After ${
      measured.capProbe.perProcess.refusal?.retryAfter ?? "-"
    }); ` +
    `SSE_MAX_DURATION_MS ${Duration.toMillis(defaultLiveStreams.maxDuration)}`,
    `terminal status then close: ${measured.ended.terminal} of ${s.streams} streams` +
    (measured.ended.terminal === s.streams
      ? ""
      : ` (closed early ${measured.ended.closedEarly}, failed ${measured.ended.failed}, still open ${measured.ended.stillOpen})`)
  ]
  yield* Effect.sync(() => process.stdout.write(lines.join("\n") + "\n\nwritten: bench/results/sse.json\n"))
  if (measured.ended.terminal !== s.streams) {
    return yield* Effect.dieMessage("not every stream received its terminal status")
  }
  const capHeld = (
    probe: {
      readonly cap: number
      readonly refusedAtStream: number
      readonly refusal: { readonly status: number; readonly retryAfter: string | null } | null
    }
  ) => probe.refusal?.status === 429 && probe.refusal.retryAfter !== null && probe.refusedAtStream === probe.cap + 1
  if (!capHeld(measured.capProbe.perUser) || !capHeld(measured.capProbe.perProcess)) {
    return yield* Effect.dieMessage("a cap on live streams did not refuse the stream past it with 429 and Retry-After")
  }
}).pipe(
  Effect.scoped,
  Effect.provide(FetchHttpClient.layer),
  Logger.withMinimumLogLevel(LogLevel.Warning)
)

NodeRuntime.runMain(program)
