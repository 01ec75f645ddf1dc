/**
 * `npm run bench:goodput`: issue 17's "AI goodput" figures. One worker process (with the API and
 * a dispatcher beside it, on the local MariaDB and Redis) against the limited fake provider:
 * 2 s median latency, 3,000 RPM. Prints jobs/s as a share of the limit, 429s per 1,000 jobs,
 * the worker's RSS and CPU while 500 jobs are in flight, and the p95 queue wait of interactive
 * jobs created while the background queue is saturated. Figures, not a test.
 */
import { readFileSync } from "node:fs"
import { NodeRuntime } from "@effect/platform-node"
import { Duration, Effect, Schema } from "effect"
import { startLimitedFakeProvider } from "../test/support/limitedFakeProvider.js"
import {
  createJob,
  dispatcherStarted,
  engineEnv,
  engineStorage,
  feynmanRequest,
  flashcardRequest,
  queryRows,
  startProgram,
  tokenFor,
  withDatabase,
  workerStarted
} from "../test/process/support/engine.js"

const jobs = Number(process.env["GOODPUT_JOBS"] ?? "3000")
const rpm = 3_000
const interactiveProbes = 20
const clockTicks = 100

const answerFor = (messages: ReadonlyArray<{ readonly content: string }>) =>
  messages.some((message) => message.content.includes("Feynman"))
    ? JSON.stringify({ score: 70, feedback: "A fair explanation.", gaps: [] })
    : JSON.stringify({ flashcards: [{ front: "What does chlorophyll absorb?", back: "Light." }] })

/** CPU seconds (user + system) and RSS in MB of a process, from /proc. */
const usageOf = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? []
  const cpuSeconds = (Number(stat[11]) + Number(stat[12])) / clockTicks
  const rss = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]
  return { cpuSeconds, rssMb: Number(rss ?? 0) / 1024 }
}

const Counts = Schema.Struct({ status: Schema.String, n: Schema.Number })
const Waits = Schema.Struct({ waitMs: Schema.NullOr(Schema.Number) })

const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN
}

const program = Effect.gen(function* () {
  const provider = yield* startLimitedFakeProvider({ latency: { medianMs: 2_000, p99Ms: 8_000 }, limits: { rpm }, content: (request) => answerFor(request.messages) })
  const storage = yield* engineStorage("goodput")
  const env = engineEnv(storage, {
    AI_GATEWAY: "openai",
    AI_BASE_URL: provider.baseUrl,
    AI_API_KEY: provider.apiKey,
    AI_RATE_LIMITS: JSON.stringify({ "deepseek/deepseek-chat": { rpm, concurrency: 200 } }),
    WORKER_CONCURRENCY_INTERACTIVE: "50",
    WORKER_CONCURRENCY_BACKGROUND: "450",
    MAX_ACTIVE_JOBS_PER_USER: String(jobs + interactiveProbes),
    DAILY_JOB_QUOTA: String(jobs + interactiveProbes),
    JOB_LOCK_TTL_MS: "60000",
    JOB_HEARTBEAT_MS: "15000"
  })
  const [api, worker] = yield* Effect.all(
    [
      startProgram("api", "api", env),
      startProgram("worker", "worker", { ...env, WORKER_ID: "goodput-worker" }, { ready: workerStarted }),
      startProgram("dispatcher", "dispatcher", env, { ready: dispatcherStarted })
    ],
    { concurrency: "unbounded" }
  )
  const counts = withDatabase(
    storage,
    queryRows(Counts, "SELECT lifecycle_status AS status, COUNT(*) AS n FROM ai_job GROUP BY lifecycle_status")
  ).pipe(Effect.map((rows) => new Map(rows.map((row) => [row.status, row.n]))))

  process.stderr.write(`goodput: creating ${jobs} background jobs\n`)
  const started = Date.now()
  const token = yield* tokenFor(storage, "goodput-bulk")
  const creating = yield* Effect.fork(
    Effect.forEach(Array.from({ length: jobs }, (_, i) => i), (i) =>
      createJob(api.baseUrl, token, "flashcard-generations", flashcardRequest(i)), { concurrency: 16, discard: true })
  )

  // Wait for 500 in flight, then measure the worker's CPU over 10 s and its RSS.
  let atLoad: { cpuPercent: number; rssMb: number; running: number } | undefined
  while (atLoad === undefined && Date.now() - started < 120_000) {
    const running = (yield* counts).get("running") ?? 0
    if (running >= 450) {
      const before = usageOf(worker.pid)
      yield* Effect.sleep(Duration.seconds(10))
      const after = usageOf(worker.pid)
      atLoad = { cpuPercent: ((after.cpuSeconds - before.cpuSeconds) / 10) * 100, rssMb: after.rssMb, running }
    } else yield* Effect.sleep(Duration.millis(500))
  }

  // Interactive jobs while the background queue is saturated: their wait from creation to start.
  const interactiveToken = yield* tokenFor(storage, "goodput-interactive")
  const probes: Array<string> = []
  for (let i = 0; i < interactiveProbes; i++) {
    probes.push((yield* createJob(api.baseUrl, interactiveToken, "feynman-evaluations", feynmanRequest(i))).jobId)
    yield* Effect.sleep(Duration.millis(500))
  }

  let finishedAt = 0
  while (Date.now() - started < 30 * 60_000) {
    const now = yield* counts
    const succeeded = now.get("succeeded") ?? 0
    const failed = now.get("failed") ?? 0
    if (succeeded + failed >= jobs + interactiveProbes) {
      finishedAt = Date.now()
      break
    }
    yield* Effect.sleep(Duration.millis(250))
  }
  yield* Effect.fromFiber(creating).pipe(Effect.orDie)
  const final = yield* counts
  const waits = yield* withDatabase(
    storage,
    queryRows(
      Waits,
      `SELECT TIMESTAMPDIFF(MICROSECOND, created_at, started_at) / 1000 AS wait_ms FROM ai_job WHERE id IN (${probes.map(() => "?").join(",")})`,
      probes
    )
  )
  const seen = yield* provider.counters
  const seconds = (finishedAt - started) / 1000
  const jobsPerSecond = (jobs + interactiveProbes) / seconds
  const report = {
    jobs: jobs + interactiveProbes,
    succeeded: final.get("succeeded") ?? 0,
    failed: final.get("failed") ?? 0,
    seconds: Math.round(seconds * 10) / 10,
    jobsPerSecond: Math.round(jobsPerSecond * 100) / 100,
    shareOfLimit: `${Math.round((jobsPerSecond / (rpm / 60)) * 1000) / 10} %`,
    providerRequests: seen.requests,
    rateLimitedPer1000Jobs: Math.round((seen.rateLimited / (jobs + interactiveProbes)) * 10_000) / 10,
    maxAcceptedInAnyMinute: seen.maxAcceptedInAnyMinute,
    maxProviderInFlight: seen.maxInFlight,
    workerAtLoad: atLoad,
    interactiveQueueWaitMs: {
      p50: percentile(waits.map((row) => row.waitMs ?? NaN), 50),
      p95: percentile(waits.map((row) => row.waitMs ?? NaN), 95)
    }
  }
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
}).pipe(Effect.scoped)

NodeRuntime.runMain(program)
