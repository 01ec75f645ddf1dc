/**
 * `npm run bench:goodput`: issue 17's "AI goodput" figures. One worker process (with the API and
 * a dispatcher beside it, on the local MariaDB and Redis) against the limited fake provider:
 * 2 s median latency, 3,000 RPM. A closed-loop producer keeps the background queue saturated (the
 * worker holds `GOODPUT_IN_FLIGHT` jobs, default 500) for `GOODPUT_SECONDS` (default 180); the
 * first 60 s are warm-up (a sliding 60 s window lets the first minute burst), the rest is measured:
 * successful provider calls a second as a share of the limit, 429s per 1,000 jobs, the worker's
 * RSS and CPU, and the wait of interactive probes created meanwhile, from their creation until the
 * provider sees their call. Prints [MET] / [MISSED] per target, with the reason when missed.
 * Then the same run again with the worker floor (`bench/workerFloor.ts`, the worker's job written by
 * hand with no Effect) in the engine worker's place, so the worker's CPU and RSS targets are read
 * against what the job's own I/O costs in Node, measured in the same run. `GOODPUT_WORKERS=engine`
 * (or `floor`) runs one of the two. Figures, not a test. `GOODPUT_SECONDS=120` is the shortest run
 * with a full measured minute.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Duration, Effect, Schema } from "effect"
import { mkdtemp } from "node:fs/promises"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { freePort, spawnProgram } from "../test/process/support/childProcess.js"
import {
  createJob,
  dispatcherStarted,
  engineEnv,
  engineStorage,
  flashcardRequest,
  queryRows,
  startProgram,
  tokenFor,
  withDatabase,
  workerStarted
} from "../test/process/support/engine.js"
import { startLimitedFakeProvider } from "../test/support/limitedFakeProvider.js"
import { processUsage } from "./procStat.js"

type WorkerKind = "engine" | "floor"
const workerKinds = (process.env["GOODPUT_WORKERS"] ?? "engine,floor")
  .split(",")
  .map((kind) => kind.trim())
  .filter((kind): kind is WorkerKind => kind === "engine" || kind === "floor")

const seconds = Number(process.env["GOODPUT_SECONDS"] ?? "180")
const inFlight = Number(process.env["GOODPUT_IN_FLIGHT"] ?? "500")
const warmupSeconds = 60
const rpm = 3_000
const limitPerSecond = rpm / 60
const interactiveConcurrency = 50
/** Jobs queued beyond what the worker holds, so it never runs dry between producer rounds. */
const backlogMargin = 300
/** HTTP connections the producer spreads its creates over. */
const producerConnections = 32
/**
 * Users the background jobs come from: creates of one user serialize on that user's quota row
 * (one commit each), so a single user cannot create 50 jobs a second, and real load has many.
 */
const producerUsers = 64
const probeEveryMs = 2_000
/** A directory: the worker writes a V8 CPU profile there (`--cpu-prof`) when the bench stops it. */
const workerProfileDir = process.env["GOODPUT_WORKER_PROFILE_DIR"]
/** NODE_OPTIONS for the worker only (e.g. `--max-semi-space-size=…` to see what RSS is garbage). */
const workerNodeOptions = process.env["GOODPUT_WORKER_NODE_OPTIONS"]
/** `WORKER_HEAP_GROWTH_PERCENT` for the worker, when set here. */
const workerHeapGrowth = process.env["WORKER_HEAP_GROWTH_PERCENT"]

/** A worker program (a bundle) started on node, with `--cpu-prof` when a profile is asked for (NODE_OPTIONS does not take it). */
const startWorker = (name: string, script: string, env: NodeJS.ProcessEnv) =>
  Effect.gen(function*() {
    const port = yield* freePort
    const profile = workerProfileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${workerProfileDir}`]
    const program = yield* spawnProgram(name, "node", [...profile, script], { ...env, PORT: String(port) })
    yield* program.waitForOutput(workerStarted, Duration.seconds(30))
    return program
  })

/** The worker floor bundled as the engine's programs are (`scripts/build.mjs`), so both load one file. */
const bundleWorkerFloor = Effect.promise(async () => {
  const esbuild = await import("esbuild")
  const outfile = join(await mkdtemp(join(tmpdir(), "goodput-floor-")), "worker-floor.mjs")
  await esbuild.build({
    entryPoints: ["bench/workerFloor.ts"],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    banner: {
      js:
        "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);"
    },
    logLevel: "warning"
  })
  return outfile
})

const probeConcept = (i: number) => `goodput probe ${i}`
const probeOf = /goodput probe (\d+)/

const Counts = Schema.Struct({ status: Schema.String, n: Schema.Number })
const Started = Schema.Struct({
  id: Schema.String,
  waitMs: Schema.NullOr(Schema.Number),
  publishMs: Schema.NullOr(Schema.Number)
})
const Pending = Schema.Struct({ n: Schema.Number })

const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN
}
const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits

/** One run: the engine's API and dispatcher, and the engine's worker or the floor, on fresh storage. */
const measure = (kind: WorkerKind, floorScript: string) =>
  Effect.gen(function*() {
    const loadAtStart = loadavg()[0] ?? NaN
    // When the provider first sees each probe's call (the content callback runs as a request arrives).
    const probeArrivals = new Map<number, number>()
    const provider = yield* startLimitedFakeProvider({
      latency: { medianMs: 2_000, p99Ms: 8_000 },
      limits: { rpm },
      content: (request) => {
        const probe = request.messages.map((message) => probeOf.exec(message.content)?.[1]).find((id) =>
          id !== undefined
        )
        if (probe !== undefined && !probeArrivals.has(Number(probe))) probeArrivals.set(Number(probe), Date.now())
        return request.messages.some((message) => message.content.includes("Feynman"))
          ? JSON.stringify({ score: 70, feedback: "A fair explanation.", gaps: [] })
          : JSON.stringify({ flashcards: [{ front: "What does chlorophyll absorb?", back: "Light." }] })
      }
    })
    const storage = yield* engineStorage(`goodput-${kind}`)
    const env = engineEnv(storage, {
      AI_GATEWAY: "openai",
      AI_BASE_URL: provider.baseUrl,
      AI_API_KEY: provider.apiKey,
      AI_RATE_LIMITS: JSON.stringify({ "deepseek/deepseek-chat": { rpm, concurrency: 200 } }),
      WORKER_CONCURRENCY_INTERACTIVE: String(interactiveConcurrency),
      WORKER_CONCURRENCY_BACKGROUND: String(inFlight),
      MAX_ACTIVE_JOBS_PER_USER: "1000000",
      DAILY_JOB_QUOTA: "1000000",
      JOB_LOCK_TTL_MS: "60000",
      JOB_HEARTBEAT_MS: "15000",
      // Ten connections left a third of the 500 jobs queued for one, unlocked (see README).
      DATABASE_POOL_SIZE: String(Math.max(10, Math.ceil(inFlight / 15))),
      // What production writes (one JSON line per log), not the terminal's pretty format.
      LOG_FORMAT: "json"
    })
    const workerEnv = {
      ...env,
      WORKER_ID: "goodput-worker",
      ...(workerNodeOptions === undefined ? {} : { NODE_OPTIONS: workerNodeOptions }),
      // To compare heap policies (`0`: V8's own); the worker's default otherwise.
      ...(workerHeapGrowth === undefined ? {} : { WORKER_HEAP_GROWTH_PERCENT: workerHeapGrowth })
    }
    const [api, worker] = yield* Effect.all(
      [
        startProgram("api", "api", env),
        kind === "engine"
          ? startWorker("worker", "dist/worker.js", workerEnv)
          : startWorker("worker-floor", floorScript, workerEnv),
        startProgram("dispatcher", "dispatcher", env, { ready: dispatcherStarted })
      ],
      { concurrency: "unbounded" }
    )
    const counts = withDatabase(
      storage,
      queryRows(Counts, "SELECT lifecycle_status AS status, COUNT(*) AS n FROM ai_job GROUP BY lifecycle_status")
    ).pipe(Effect.map((rows) => new Map(rows.map((row) => [row.status, row.n]))))

    const tokens = yield* Effect.forEach(
      Array.from({ length: producerUsers }, (_, i) => i),
      (i) => tokenFor(storage, `goodput-bulk-${i}`)
    )
    const interactiveToken = yield* tokenFor(storage, "goodput-interactive")
    const started = Date.now()
    const elapsed = () => (Date.now() - started) / 1000
    process.stderr.write(
      `goodput (${
        kind === "engine" ? "the engine's worker" : "the worker floor"
      }): ${seconds} s (${warmupSeconds} s warm-up), worker holds up to ${inFlight} background jobs\n`
    )

    // Closed loop: keep the jobs not yet answered at what the worker holds plus a margin.
    let created = 0
    let createFailures = 0
    let backlogShortSamples = 0
    let measuredSamples = 0
    const producer = Effect.forEach(
      Array.from({ length: producerConnections }, (_, i) => i),
      () =>
        Effect.gen(function*() {
          while (elapsed() < seconds) {
            const seen = yield* provider.counters
            if (created - seen.succeeded >= inFlight + backlogMargin) {
              yield* Effect.sleep(Duration.millis(20))
              continue
            }
            const index = created++
            yield* createJob(
              api.baseUrl,
              tokens[index % producerUsers] ?? "",
              "flashcard-generations",
              flashcardRequest(index)
            ).pipe(
              Effect.catchAll(() => Effect.sync(() => void createFailures++))
            )
          }
        }),
      { concurrency: "unbounded", discard: true }
    )

    // Interactive probes, one every 2 s through the measured span, from a user with nothing else queued.
    const probes: Array<{ readonly index: number; readonly createdAt: number; readonly jobId: string }> = []
    const prober = Effect.gen(function*() {
      yield* Effect.sleep(Duration.seconds(warmupSeconds))
      for (let i = 0; elapsed() < seconds - 5; i++) {
        const createdAt = Date.now()
        const job = yield* createJob(api.baseUrl, interactiveToken, "feynman-evaluations", {
          concept: probeConcept(i),
          explanation: "Energy is conserved: it changes form but the total stays the same."
        })
        probes.push({ index: i, createdAt, jobId: job.jobId })
        yield* Effect.sleep(Duration.millis(probeEveryMs))
      }
    })

    // Samples: provider calls at the warm-up's end and at the end, the worker's CPU and RSS, jobs running.
    let atWarmup: { t: number; succeeded: number; cpuSeconds: number } | undefined
    let atEnd: { t: number; succeeded: number; cpuSeconds: number } | undefined
    let maxRssMb = 0
    const runningSamples: Array<number> = []
    const monitor = Effect.gen(function*() {
      let last = { t: 0, succeeded: 0, cpuSeconds: processUsage(worker.pid).cpuSeconds }
      while (elapsed() < seconds) {
        yield* Effect.sleep(Duration.seconds(5))
        const t = elapsed()
        const seen = yield* provider.counters
        const usage = processUsage(worker.pid)
        const now = yield* counts
        const running = now.get("running") ?? 0
        const outboxPending = (yield* withDatabase(
          storage,
          queryRows(Pending, "SELECT COUNT(*) AS n FROM outbox_event WHERE status IN ('pending', 'processing')")
        ))[0]?.n ?? 0
        const sample = { t, succeeded: seen.succeeded, cpuSeconds: usage.cpuSeconds }
        if (atWarmup === undefined && t >= warmupSeconds) atWarmup = sample
        if (atWarmup !== undefined) {
          maxRssMb = Math.max(maxRssMb, usage.rssMb)
          runningSamples.push(running)
          measuredSamples++
          if (created - seen.succeeded < inFlight) backlogShortSamples++
        }
        atEnd = sample
        const dt = t - last.t
        process.stderr.write(
          `t=${Math.round(t)}s created=${created} answered=${seen.succeeded} (${
            round((seen.succeeded - last.succeeded) / dt)
          }/s) ` +
            `429s=${seen.rateLimited} outbox=${outboxPending} queued=${
              now.get("queued") ?? 0
            } running=${running} providerInFlight=${seen.inFlight} ` +
            `workerCpu=${round(((usage.cpuSeconds - last.cpuSeconds) / dt) * 100)}% rss=${Math.round(usage.rssMb)}MB\n`
        )
        last = sample
      }
    })

    yield* Effect.all([producer, prober, monitor], { concurrency: "unbounded", discard: true })

    // Let what was created finish, so every probe has started and failures are counted.
    const drainUntil = Date.now() + 120_000
    let final = yield* counts
    while (
      Date.now() < drainUntil && ((final.get("succeeded") ?? 0) + (final.get("failed") ?? 0)) < created + probes.length
    ) {
      yield* Effect.sleep(Duration.seconds(1))
      final = yield* counts
    }
    const startedRows = probes.length === 0 ? [] : yield* withDatabase(
      storage,
      queryRows(
        Started,
        `SELECT j.id, TIMESTAMPDIFF(MICROSECOND, j.created_at, j.started_at) / 1000 AS wait_ms,
         (SELECT MIN(TIMESTAMPDIFF(MICROSECOND, j.created_at, o.published_at)) / 1000 FROM outbox_event o WHERE o.aggregate_id = j.id) AS publish_ms
       FROM ai_job j WHERE j.id IN (${probes.map(() => "?").join(",")})`,
        probes.map((probe) => probe.jobId)
      )
    )
    const seen = yield* provider.counters
    if (workerProfileDir !== undefined) {
      // A graceful stop, so the profile is written (the scope would SIGKILL it).
      yield* worker.signal("SIGTERM")
      yield* Effect.ignore(worker.awaitExit(Duration.seconds(60)))
    }
    const loadAtEnd = loadavg()[0] ?? NaN

    const measuredSeconds = atWarmup !== undefined && atEnd !== undefined ? atEnd.t - atWarmup.t : NaN
    const answeredPerSecond = atWarmup !== undefined && atEnd !== undefined
      ? (atEnd.succeeded - atWarmup.succeeded) / measuredSeconds
      : NaN
    const share = answeredPerSecond / limitPerSecond
    const cpuPercent = atWarmup !== undefined && atEnd !== undefined
      ? ((atEnd.cpuSeconds - atWarmup.cpuSeconds) / measuredSeconds) * 100
      : NaN
    const runningMean = runningSamples.reduce((sum, n) => sum + n, 0) / Math.max(1, runningSamples.length)
    const totalJobs = created + probes.length
    const per1000 = (seen.rateLimited / Math.max(1, totalJobs)) * 1000
    const untilProvider = probes.flatMap((probe) => {
      const arrived = probeArrivals.get(probe.index)
      return arrived === undefined ? [] : [arrived - probe.createdAt]
    })
    const untilStarted = startedRows.flatMap((row) => (row.waitMs === null ? [] : [row.waitMs]))
    const untilPublished = startedRows.flatMap((row) => (row.publishMs === null ? [] : [row.publishMs]))
    const report = {
      seconds,
      measuredSeconds: round(measuredSeconds),
      jobsCreated: created,
      createFailures,
      succeeded: final.get("succeeded") ?? 0,
      failed: final.get("failed") ?? 0,
      answeredPerSecond: round(answeredPerSecond, 2),
      shareOfLimit: `${round(share * 100)} %`,
      providerRequests: seen.requests,
      rateLimited: seen.rateLimited,
      rateLimitedPer1000Jobs: round(per1000),
      maxAcceptedInAnyMinute: seen.maxAcceptedInAnyMinute,
      maxProviderInFlight: seen.maxInFlight,
      backlogShortSamples: `${backlogShortSamples}/${measuredSamples}`,
      worker: {
        runningMean: Math.round(runningMean),
        cpuPercent: round(cpuPercent),
        cpuMsPerJob: round((cpuPercent * 10) / Math.max(answeredPerSecond, 1e-9), 2),
        maxRssMb: round(maxRssMb, 1)
      },
      interactiveProbes: probes.length,
      interactiveMs: {
        createdToProviderP50: percentile(untilProvider, 50),
        createdToProviderP95: percentile(untilProvider, 95),
        createdToPublishedP95: percentile(untilPublished, 95),
        createdToLockedP95: percentile(untilStarted, 95),
        probesNeverSent: probes.length - untilProvider.length
      },
      loadAverage: { start: round(loadAtStart, 2), end: round(loadAtEnd, 2) }
    }
    process.stdout.write(
      `${kind === "engine" ? "the engine's worker" : "the worker floor"}: ${JSON.stringify(report, null, 2)}\n`
    )
    return {
      kind,
      share,
      per1000,
      totalJobs,
      rateLimited: seen.rateLimited,
      maxInFlight: seen.maxInFlight,
      backlogShort: backlogShortSamples > measuredSamples / 4,
      backlogShortSamples: `${backlogShortSamples}/${measuredSamples}`,
      runningMean,
      answeredPerSecond,
      cpuPercent,
      maxRssMb,
      loadAtEnd,
      probes: probes.length,
      untilProvider,
      untilPublished,
      untilStarted
    }
  }).pipe(Effect.scoped)

type Measured = Effect.Effect.Success<ReturnType<typeof measure>>

const msPerJob = (run: Measured) => round((run.cpuPercent * 10) / Math.max(run.answeredPerSecond, 1e-9), 2)

/** Issue 17's targets for `run`; the floor's figures, when measured, say what the worker's own I/O costs. */
const printTargets = (run: Measured, floor: Measured | undefined) => {
  const who = run.kind === "engine" ? "" : " (the worker floor)"
  const line = (met: boolean, text: string, reason: string) =>
    process.stdout.write(`[${met ? "MET" : "MISSED"}] ${text}${who}${met ? "" : ` — ${reason}`}\n`)
  const atLoad = run.runningMean >= 0.9 * inFlight
  const held = `the worker held ${Math.round(run.runningMean)} jobs, not ${inFlight}`
  const floorSays = (figure: string) => floor === undefined || floor === run ? "" : `; the worker floor: ${figure}`
  line(
    run.share >= 0.9,
    `goodput ${round(run.share * 100)} % of ${rpm} RPM (target ≥ 90 %)`,
    run.backlogShort
      ? `the producer did not keep the worker's ${inFlight} jobs queued (${run.backlogShortSamples} samples short)`
      : `the worker held ${
        Math.round(run.runningMean)
      } jobs; provider in flight peaked at ${run.maxInFlight}; worker CPU ${round(run.cpuPercent)} % (load average ${
        round(run.loadAtEnd, 2)
      })`
  )
  line(
    run.per1000 <= 5,
    `429s per 1,000 jobs ${round(run.per1000)} (target ≤ 5)`,
    `${run.rateLimited} 429s over ${run.totalJobs} jobs`
  )
  line(
    atLoad && run.maxRssMb <= 300,
    `worker RSS ${round(run.maxRssMb, 1)} MB at ${
      Math.round(run.runningMean)
    } jobs in flight (target ≤ 300 MB at ${inFlight})`,
    (atLoad ? "RSS over 300 MB" : held) +
      floorSays(`${round(floor?.maxRssMb ?? NaN, 1)} MB at ${Math.round(floor?.runningMean ?? NaN)} jobs`)
  )
  line(
    atLoad && run.cpuPercent <= 25,
    `worker CPU ${round(run.cpuPercent)} % of one core at ${
      Math.round(run.runningMean)
    } jobs in flight (target ≤ 25 %)`,
    (atLoad ? `${msPerJob(run)} ms of CPU per job at ${round(run.answeredPerSecond)} jobs/s` : held) +
      floorSays(
        `${round(floor?.cpuPercent ?? NaN)} %, ${floor === undefined ? NaN : msPerJob(floor)} ms per job at ${
          round(floor?.answeredPerSecond ?? NaN)
        } jobs/s`
      )
  )
  const p95 = percentile(run.untilProvider, 95)
  const lockedP95 = percentile(run.untilStarted, 95)
  line(
    run.untilProvider.length === run.probes && p95 <= 2_000,
    `interactive p95 wait from creation to the provider call ${
      Math.round(p95)
    } ms while the background queue is saturated (target ≤ one round trip, 2 s median)`,
    run.untilProvider.length < run.probes
      ? `${run.probes - run.untilProvider.length} probes never reached the provider`
      : `p95 until published to the queue ${
        Math.round(percentile(run.untilPublished, 95))
      } ms, until locked by the worker ${Math.round(lockedP95)} ms: ` +
        (lockedP95 > p95 / 2
          ? "the worker takes the job late (its event loop and database pool are busy with background jobs)"
          : "the wait for provider capacity dominates")
  )
}

const program = Effect.gen(function*() {
  const floorScript = workerKinds.includes("floor") ? yield* bundleWorkerFloor : ""
  const runs: Array<Measured> = []
  for (const kind of workerKinds) runs.push(yield* measure(kind, floorScript))
  const engine = runs.find((run) => run.kind === "engine")
  const floor = runs.find((run) => run.kind === "floor")
  if (floor !== undefined) {
    process.stdout.write(
      `worker floor: goodput ${round(floor.share * 100)} %, CPU ${round(floor.cpuPercent)} % of one core (${
        msPerJob(floor)
      } ms per job), ` +
        `RSS ${round(floor.maxRssMb, 1)} MB at ${Math.round(floor.runningMean)} jobs in flight\n`
    )
  }
  const shown = engine ?? floor
  if (shown === undefined) return yield* Effect.dieMessage("GOODPUT_WORKERS names neither engine nor floor")
  printTargets(shown, floor)
})

NodeRuntime.runMain(program)
