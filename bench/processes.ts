/**
 * `npm run bench:processes`: the engine as production runs it, as separate processes (API,
 * dispatcher, two workers, the built `dist/` programs) on the local MariaDB and Redis, with the
 * instant synthetic provider, fed over HTTP by the typed client. Four phases: one producer
 * (creates one at a time), full load (`BENCH_PROCESSES_PRODUCERS` at once), half load (creates
 * paced at half the full-load rate) and batches (`POST .../batch` of `BENCH_PROCESSES_BATCH_SIZE`
 * jobs, `BENCH_PROCESSES_BATCH_PRODUCERS` at once), judged against full load's rate. For each: CPU per job of every process (from /proc), SQL per
 * job as each process sent it (a counting proxy per process, `mysqlWireCounter.ts`), outbox
 * statements per job beyond the event's own INSERT, and commit → running (database clock). Prints issue 14's targets as
 * [MET]/[MISSED] with the reason (and the second round's CPU per job); writes bench/results/processes.json. Figures, not a test.
 */
import { FetchHttpClient } from "@effect/platform"
import { NodeRuntime } from "@effect/platform-node"
import { Config, Duration, Effect, type Fiber, Schedule, Schema } from "effect"
import { readFileSync } from "node:fs"
import { mkdir, writeFile } from "node:fs/promises"
import { availableParallelism, loadavg } from "node:os"
import { fileURLToPath } from "node:url"
import { makeAiJobClient } from "../src/http/client.js"
import {
  dispatcherStarted,
  engineEnv,
  engineStorage,
  flashcardRequest,
  startProgram,
  tokenFor,
  workerStarted
} from "../test/process/support/engine.js"
import { queryAs, rawPool } from "./infra.js"
import { diffWireCounts, startMysqlWireCounter, type WireCounts } from "./mysqlWireCounter.js"
import { processBenchEnv } from "./processEnv.js"
import { processUsage } from "./procStat.js"
import { commitsOf } from "./sqlCounter.js"
import { percentile, perJobCounts, round } from "./stats.js"

const resultsFile = fileURLToPath(new URL("./results/processes.json", import.meta.url))
const step = (label: string) => Effect.sync(() => process.stderr.write(`bench:processes: ${label}\n`))

const settings = Config.all({
  jobs: Config.integer("BENCH_PROCESSES_JOBS").pipe(Config.withDefault(1_500)),
  oneProducerJobs: Config.integer("BENCH_PROCESSES_ONE_PRODUCER_JOBS").pipe(Config.withDefault(300)),
  producers: Config.integer("BENCH_PROCESSES_PRODUCERS").pipe(Config.withDefault(32)),
  users: Config.integer("BENCH_PROCESSES_USERS").pipe(Config.withDefault(64)),
  batchSize: Config.integer("BENCH_PROCESSES_BATCH_SIZE").pipe(Config.withDefault(100)),
  batchProducers: Config.integer("BENCH_PROCESSES_BATCH_PRODUCERS").pipe(Config.withDefault(4)),
  /**
   * A directory: each process writes a V8 CPU profile there (`--cpu-prof`) when it stops at the end;
   * `npx tsx bench/cpuProfileSummary.ts dir/worker-1.cpuprofile dir/worker-2.cpuprofile` reads them.
   */
  cpuProfileDirectory: Config.string("BENCH_PROCESSES_CPU_PROF").pipe(Config.withDefault(""))
})

/** Issue 14's targets for every load. */
const maxStatementsPerJob = 12
const maxCommitsPerJob = 3
const maxOutboxStatementsPerJob = 0.2
const halfLoadP50Ms = 5
const halfLoadP99Ms = 25
/** The second round's target: a job's Node CPU in the API and the workers together. */
const maxCpuMsPerJob = 7
/** Batch creation's targets: end to end against full load's single creates in the same run. */
const minBatchSpeedup = 3
const maxBatchApiCpuMsPerJob = 0.5
const maxBatchStatementsPerJob = 7

const cpuSecondsOf = (pid: number) => processUsage(pid).cpuSeconds

/** MariaDB's own process (it serves other clients too, so its figure is an upper bound). */
const mariadbPid = (): number | undefined => {
  try {
    const pid = Number(readFileSync("/run/mysqld/mysqld.pid", "utf8").trim())
    return pid > 0 ? pid : undefined
  } catch {
    return undefined
  }
}

const Terminal = Schema.Struct({ n: Schema.Number })
const Started = Schema.Struct({ toRunningUs: Schema.NullOr(Schema.Number) })

type Load = "one producer" | "half load" | "full load" | `batches of ${number}`

interface PhaseResult {
  readonly load: Load
  readonly jobs: number
  readonly seconds: number
  readonly perSecond: number
  readonly cpuMsPerJob: Readonly<Record<string, number>>
  readonly perProcess: Readonly<
    Record<string, {
      readonly statements: number
      readonly commits: number
      readonly roundTrips: number
      readonly outbox: number
      /** Statements per job by the start of their text, the most frequent first (0.01 and up). */
      readonly byText: ReadonlyArray<readonly [string, number]>
    }>
  >
  readonly perJob: {
    readonly statements: number
    readonly roundTrips: number
    readonly prepares: number
    readonly commits: number
    readonly outboxStatements: number
    readonly selects: number
    readonly inserts: number
    readonly updates: number
  }
  readonly commitToRunningMs: { readonly p50: number; readonly p99: number }
}

const program = Effect.gen(function*() {
  const s = yield* settings
  const loadAverageStart = round(loadavg()[0] ?? 0, 2)
  const storage = yield* engineStorage("bench_processes")
  const direct = new URL(storage.databaseUrl)
  const pool = yield* rawPool(storage.databaseUrl, 2)

  const names = ["api", "dispatcher", "worker-1", "worker-2"] as const
  const counters = Object.fromEntries(
    yield* Effect.forEach(
      names,
      (name) =>
        Effect.map(
          startMysqlWireCounter({ host: direct.hostname, port: Number(direct.port || 3306) }),
          (counter) => [name, counter] as const
        )
    )
  )
  const envOf = (name: (typeof names)[number], extra: Readonly<Record<string, string>> = {}) => {
    const proxied = new URL(storage.databaseUrl)
    proxied.hostname = "127.0.0.1"
    proxied.port = String(counters[name]?.port)
    return engineEnv(storage, {
      DATABASE_URL: proxied.toString(),
      ...processBenchEnv,
      ...extra
    })
  }
  const profiled = (name: string) =>
    s.cpuProfileDirectory === ""
      ? []
      : ["--cpu-prof", `--cpu-prof-dir=${s.cpuProfileDirectory}`, `--cpu-prof-name=${name}.cpuprofile`]
  yield* step("starting API, dispatcher and two workers")
  const [api, dispatcher, worker1, worker2] = yield* Effect.all(
    [
      startProgram("api", "api", envOf("api"), { nodeOptions: profiled("api") }),
      startProgram("dispatcher", "dispatcher", envOf("dispatcher"), {
        ready: dispatcherStarted,
        nodeOptions: profiled("dispatcher")
      }),
      startProgram("worker", "worker-1", envOf("worker-1", { WORKER_ID: "bench-worker-1" }), {
        ready: workerStarted,
        nodeOptions: profiled("worker-1")
      }),
      startProgram("worker", "worker-2", envOf("worker-2", { WORKER_ID: "bench-worker-2" }), {
        ready: workerStarted,
        nodeOptions: profiled("worker-2")
      })
    ],
    { concurrency: "unbounded" }
  )
  const pids: Record<string, number> = {
    api: api.pid,
    dispatcher: dispatcher.pid,
    "worker-1": worker1.pid,
    "worker-2": worker2.pid
  }
  const database = mariadbPid()
  if (database !== undefined) pids["mariadb (whole server)"] = database

  const clients = yield* Effect.forEach(
    Array.from({ length: s.users }, (_, i) => i),
    (i) =>
      Effect.flatMap(
        tokenFor(storage, `bench-processes-user-${i}`),
        (token) => makeAiJobClient({ baseUrl: api.baseUrl, token })
      )
  )
  let created = 0
  const create = Effect.suspend(() => {
    const i = created++
    const client = clients[i % clients.length]
    if (client === undefined) return Effect.die(new Error("no client"))
    return client.jobs.createFlashcardGeneration({ payload: flashcardRequest(i), headers: {} }).pipe(
      Effect.retry(Schedule.intersect(Schedule.exponential("50 millis"), Schedule.recurs(5))),
      Effect.map((job) => job.jobId),
      Effect.orDie
    )
  })
  let batchesSent = 0
  /** One batch of `batchSize` flashcard jobs; its key makes a retried batch the same batch. */
  const createBatch = Effect.suspend(() => {
    const first = created
    created += s.batchSize
    const client = clients[batchesSent++ % clients.length]
    if (client === undefined) return Effect.die(new Error("no client"))
    const items = Array.from({ length: s.batchSize }, (_, k) => flashcardRequest(first + k))
    return client.jobs.createFlashcardGenerationBatch({
      payload: { items },
      headers: { "idempotency-key": `bench-batch-${first}` }
    }).pipe(
      Effect.retry(Schedule.intersect(Schedule.exponential("50 millis"), Schedule.recurs(5))),
      Effect.map((answer) => answer.jobs.map((job) => job.jobId)),
      Effect.orDie
    )
  })
  const awaitAllTerminal = Effect.gen(function*() {
    const [row] = yield* queryAs(
      pool,
      Terminal,
      `SELECT COUNT(*) AS n FROM ai_job WHERE lifecycle_status IN ('succeeded', 'failed', 'cancelled')`
    )
    if ((row?.n ?? 0) < created) return yield* Effect.fail("not yet" as const)
  }).pipe(
    Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("180 seconds"))),
    Effect.orDieWith(() => new Error(`${created} jobs were not all terminal within 180 s`))
  )

  const runPhase = (load: Load, jobs: number, drive: Effect.Effect<ReadonlyArray<string>>) =>
    Effect.gen(function*() {
      yield* step(`${load}: ${jobs} jobs`)
      const countsBefore = Object.fromEntries(names.map((name) => [name, counters[name]?.snapshot()]))
      const cpuBefore = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuSecondsOf(pid)]))
      const began = performance.now()
      const ids = yield* drive
      yield* awaitAllTerminal
      const seconds = (performance.now() - began) / 1000
      const cpuMsPerJob = Object.fromEntries(
        Object.entries(pids).map((
          [name, pid]
        ) => [name, round(((cpuSecondsOf(pid) - (cpuBefore[name] ?? 0)) * 1000) / jobs, 2)])
      )
      const engineCpu = names.reduce((sum, name) => sum + (cpuMsPerJob[name] ?? 0), 0)
      const counts = new Map<string, WireCounts>(names.flatMap((name) => {
        const before = countsBefore[name]
        const after = counters[name]?.snapshot()
        return before === undefined || after === undefined ? [] : [[name, diffWireCounts(after, before)] as const]
      }))
      const total = (pick: (c: WireCounts) => number) => [...counts.values()].reduce((sum, c) => sum + pick(c), 0)
      const perProcess = Object.fromEntries(names.map((name) => {
        const c = counts.get(name)
        return [name, {
          statements: round((c?.statements ?? 0) / jobs, 2),
          commits: round((c === undefined ? 0 : commitsOf(c)) / jobs, 2),
          roundTrips: round((c?.roundTrips ?? 0) / jobs, 2),
          outbox: round((c?.outboxStatements ?? 0) / jobs, 2),
          byText: perJobCounts(Object.entries(c?.byText ?? {}), jobs)
        }]
      }))
      const started = yield* queryAs(
        pool,
        Started,
        `SELECT CAST(TIMESTAMPDIFF(MICROSECOND, created_at, started_at) AS SIGNED) AS toRunningUs
           FROM ai_job WHERE id IN (${ids.map(() => "?").join(", ")})`,
        ids
      )
      const toRunning = started.flatMap((row) => (row.toRunningUs === null ? [] : [row.toRunningUs / 1000]))
      const result: PhaseResult = {
        load,
        jobs,
        seconds: round(seconds, 2),
        perSecond: round(jobs / seconds, 1),
        cpuMsPerJob: { ...cpuMsPerJob, "engine (API + dispatcher + workers)": round(engineCpu, 2) },
        perProcess,
        perJob: {
          statements: round(total((c) => c.statements) / jobs, 2),
          roundTrips: round(total((c) => c.roundTrips) / jobs, 2),
          prepares: round(total((c) => c.prepares) / jobs, 2),
          commits: round(total(commitsOf) / jobs, 2),
          outboxStatements: round(total((c) => c.outboxStatements) / jobs, 2),
          selects: round(total((c) => c.selects) / jobs, 2),
          inserts: round(total((c) => c.inserts) / jobs, 2),
          updates: round(total((c) => c.updates) / jobs, 2)
        },
        commitToRunningMs: { p50: round(percentile(toRunning, 50), 1), p99: round(percentile(toRunning, 99), 1) }
      }
      return result
    })

  // Warm-up, not counted: connections, JIT, the first queue adds.
  yield* step("warm-up (not counted): 200 jobs")
  yield* Effect.forEach(Array.from({ length: 200 }), () => create, { concurrency: s.producers, discard: true })
  yield* awaitAllTerminal

  const oneProducer = yield* runPhase(
    "one producer",
    s.oneProducerJobs,
    Effect.forEach(Array.from({ length: s.oneProducerJobs }), () => create)
  )
  const full = yield* runPhase(
    "full load",
    s.jobs,
    Effect.forEach(Array.from({ length: s.jobs }), () => create, { concurrency: s.producers })
  )
  // Half load: one create every 2 / (full rate) seconds, each on its own fiber so a slow answer
  // does not hold the next one back.
  const halfRate = full.perSecond / 2
  const halfJobs = Math.max(100, Math.min(s.jobs, Math.round(halfRate * 10)))
  const half = yield* runPhase(
    "half load",
    halfJobs,
    Effect.gen(function*() {
      const interval = Duration.millis(1000 / Math.max(1, halfRate))
      const fibers: Array<Fiber.RuntimeFiber<string>> = []
      for (let i = 0; i < halfJobs; i++) {
        fibers.push(yield* Effect.fork(create))
        yield* Effect.sleep(interval)
      }
      return yield* Effect.forEach(fibers, (fiber) => fiber.await.pipe(Effect.flatMap((exit) => exit)))
    })
  )

  const batchCount = Math.max(1, Math.round(s.jobs / s.batchSize))
  const batches = yield* runPhase(
    `batches of ${s.batchSize}`,
    batchCount * s.batchSize,
    Effect.map(
      Effect.forEach(Array.from({ length: batchCount }), () => createBatch, { concurrency: s.batchProducers }),
      (lists) => lists.flat()
    )
  )

  const phases = [oneProducer, half, full, batches]
  const loadAverageEnd = round(loadavg()[0] ?? 0, 2)
  const busy = Math.max(loadAverageStart, loadAverageEnd) > availableParallelism()
  const busyNote = busy
    ? `; load average ${loadAverageStart} → ${loadAverageEnd} on ${availableParallelism()} CPUs: other work shared the machine`
    : ""
  const targets = [
    ...phases.map((p) => ({
      name: `≤ ${maxStatementsPerJob} statements per job at ${p.load}`,
      met: p.perJob.statements <= maxStatementsPerJob,
      value: `${p.perJob.statements} (${p.perJob.roundTrips} round trips)`,
      why: `by process: ${names.map((name) => `${name} ${p.perProcess[name]?.statements}`).join(", ")}; ` +
        `of them the outbox's bookkeeping beyond the event's INSERT: ${p.perJob.outboxStatements}`
    })),
    ...phases.map((p) => ({
      name: `≤ ${maxCommitsPerJob} commits per job at ${p.load}`,
      met: p.perJob.commits <= maxCommitsPerJob,
      value: String(p.perJob.commits),
      why: `by process: ${names.map((name) => `${name} ${p.perProcess[name]?.commits}`).join(", ")}; ` +
        `the outbox's own writes (marking events published, in batches) come to ${p.perJob.outboxStatements} statements per job`
    })),
    ...phases.map((p) => ({
      name: `≤ ${maxOutboxStatementsPerJob} outbox statements per job (beyond the event's INSERT) at ${p.load}`,
      met: p.perJob.outboxStatements <= maxOutboxStatementsPerJob,
      value: String(p.perJob.outboxStatements),
      why: `by process: ${names.map((name) => `${name} ${p.perProcess[name]?.outbox}`).join(", ")}`
    })),
    ...phases.map((p) => {
      const apiAndWorkers = round(
        ["api", "worker-1", "worker-2"].reduce((sum, name) => sum + (p.cpuMsPerJob[name] ?? 0), 0),
        2
      )
      return {
        name: `≤ ${maxCpuMsPerJob} ms CPU per job across API + workers at ${p.load}`,
        met: apiAndWorkers <= maxCpuMsPerJob,
        value: `${apiAndWorkers} ms (API ${p.cpuMsPerJob["api"]}, workers ${
          round((p.cpuMsPerJob["worker-1"] ?? 0) + (p.cpuMsPerJob["worker-2"] ?? 0), 2)
        }; dispatcher ${p.cpuMsPerJob["dispatcher"]} besides)`,
        why:
          `one process's hand-written floor of the same statements (npm run bench) is the figure to hold it against${busyNote}`
      }
    }),
    {
      name: `batches of ${s.batchSize}: end to end ≥ ${minBatchSpeedup} × the single-create rate (full load)`,
      met: batches.perSecond >= minBatchSpeedup * full.perSecond,
      value: `${batches.perSecond} jobs/s = ${round(batches.perSecond / full.perSecond, 2)} × ${full.perSecond}`,
      why: `CPU ms per job at batches: ${names.map((name) => `${name} ${batches.cpuMsPerJob[name]}`).join(", ")}; ` +
        `the workers run each job as before, so they bound the end-to-end rate${busyNote}`
    },
    {
      name: `batches of ${s.batchSize}: API CPU ≤ ${maxBatchApiCpuMsPerJob} ms per job`,
      met: (batches.cpuMsPerJob["api"] ?? Infinity) <= maxBatchApiCpuMsPerJob,
      value: `${batches.cpuMsPerJob["api"]} ms (single creates at full load: ${full.cpuMsPerJob["api"]} ms)`,
      why: `the API's statements per job: ${batches.perProcess["api"]?.statements}${busyNote}`
    },
    {
      name: `batches of ${s.batchSize}: ≤ ${maxBatchStatementsPerJob} statements per job (every process)`,
      met: batches.perJob.statements <= maxBatchStatementsPerJob,
      value: `${batches.perJob.statements} (single creates at full load: ${full.perJob.statements})`,
      why: `by process: ${names.map((name) => `${name} ${batches.perProcess[name]?.statements}`).join(", ")}`
    },
    {
      name: `commit → running p50 ≤ ${halfLoadP50Ms} ms at half load`,
      met: half.commitToRunningMs.p50 <= halfLoadP50Ms,
      value: `${half.commitToRunningMs.p50} ms`,
      why: `at ${round(halfRate, 1)} jobs/s${busyNote}`
    },
    {
      name: `commit → running p99 ≤ ${halfLoadP99Ms} ms at half load`,
      met: half.commitToRunningMs.p99 <= halfLoadP99Ms,
      value: `${half.commitToRunningMs.p99} ms`,
      why: `at ${round(halfRate, 1)} jobs/s${busyNote}`
    }
  ]
  const results = {
    startedAt: new Date().toISOString(),
    machine: { cpus: availableParallelism(), node: process.version, loadAverageStart, loadAverageEnd },
    settings: s,
    phases,
    targets
  }
  yield* Effect.promise(async () => {
    await mkdir(fileURLToPath(new URL("./results/", import.meta.url)), { recursive: true })
    await writeFile(resultsFile, JSON.stringify(results, null, 2) + "\n")
  })
  const processNames = Object.keys(oneProducer.cpuMsPerJob)
  const lines = [
    `engine as separate processes (API, dispatcher, 2 workers; synthetic provider, fed over HTTP): ${availableParallelism()} CPUs, Node ${process.version}, load average ${loadAverageStart} → ${loadAverageEnd}`,
    "",
    `| load | jobs | jobs/s | statements/job | round trips/job (prepares) | commits/job | outbox statements/job | commit → running p50 / p99 ms |`,
    "|---|---|---|---|---|---|---|---|",
    ...phases.map((p) =>
      `| ${p.load} | ${p.jobs} | ${p.perSecond} | ${p.perJob.statements} | ${p.perJob.roundTrips} (${p.perJob.prepares}) | ${p.perJob.commits} | ${p.perJob.outboxStatements} | ${p.commitToRunningMs.p50} / ${p.commitToRunningMs.p99} |`
    ),
    "",
    `CPU ms per job by process:`,
    "",
    `| load | ${processNames.join(" | ")} |`,
    `|---|${processNames.map(() => "---").join("|")}|`,
    ...phases.map((p) => `| ${p.load} | ${processNames.map((name) => p.cpuMsPerJob[name]).join(" | ")} |`),
    "",
    ...[full, batches].flatMap((p) => [
      `statements per job by process (${p.load}): ${
        names.map((name) => `${name} ${p.perProcess[name]?.statements}`).join(", ")
      }`,
      ...names.flatMap((name) =>
        (p.perProcess[name]?.byText ?? []).map(([text, perJob]) => `  ${name} ${perJob.toFixed(2)}  ${text}`)
      )
    ]),
    "",
    ...targets.map((t) =>
      `[${t.met ? "MET" : "MISSED"}] ${t.name}: ${t.value}${t.met ? "" : `\n         why: ${t.why}`}`
    )
  ]
  yield* Effect.sync(() => process.stdout.write(lines.join("\n") + "\n\nwritten: bench/results/processes.json\n"))
  if (s.cpuProfileDirectory !== "") {
    // A profile is written on a clean exit only: stop each program as an operator would.
    const programs = [api, dispatcher, worker1, worker2]
    yield* Effect.forEach(programs, (program) => program.signal("SIGTERM"), { discard: true })
    yield* Effect.forEach(programs, (program) => Effect.ignore(program.awaitExit(Duration.seconds(30))), {
      discard: true
    })
    yield* step(`CPU profiles written to ${s.cpuProfileDirectory} (read them with bench/cpuProfileSummary.ts)`)
  }
}).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer))

NodeRuntime.runMain(program)
