/**
 * `npm run bench:failover`: what a provider outage costs (docs/architecture.md §16.6). The engine
 * as production runs it (API, dispatcher and two workers, on the local MariaDB and Redis) with
 * two fake providers of 2 s answers, each with its own key, and the route `primary → backup`.
 * Jobs arrive at 20 a second; in the middle phase the primary answers 500 to everything. Prints
 * create → succeeded p50 / p95 before, during and after the outage, the jobs that failed
 * (target 0), and the calls the dead primary got per minute (target at most 6).
 *
 * FAILOVER_PHASE_SECONDS (default 60) sets each phase's length, FAILOVER_RATE (default 20) the
 * jobs a second.
 */
import { FetchHttpClient } from "@effect/platform"
import { NodeRuntime } from "@effect/platform-node"
import { Config, Duration, Effect, Schedule, Schema } from "effect"
import { mkdir, writeFile } from "node:fs/promises"
import { loadavg } from "node:os"
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
import { answerForPrompt, startSwitchableProvider } from "../test/support/switchableProvider.js"
import { queryAs, rawPool, runPaced } from "./infra.js"
import { processBenchEnv } from "./processEnv.js"
import { percentile, round } from "./stats.js"

const resultsFile = fileURLToPath(new URL("./results/failover.json", import.meta.url))

const step = (label: string) => Effect.sync(() => process.stderr.write(`bench:failover: ${label}\n`))

const settings = Config.all({
  phaseSeconds: Config.integer("FAILOVER_PHASE_SECONDS").pipe(Config.withDefault(60)),
  rate: Config.number("FAILOVER_RATE").pipe(Config.withDefault(20)),
  users: Config.integer("FAILOVER_USERS").pipe(Config.withDefault(20))
})

const providerLatencyMs = 2_000
/** Issue 34's targets. */
const maxFailedJobs = 0
const maxDeadCallsPerMinute = 6

const phases = ["before", "during", "after"] as const
type Phase = (typeof phases)[number]

const JobRow = Schema.Struct({
  id: Schema.String,
  status: Schema.String,
  errorCode: Schema.NullOr(Schema.String),
  ms: Schema.NullOr(Schema.Union(Schema.Number, Schema.NumberFromString))
})

const program = Effect.gen(function*() {
  const s = yield* settings
  const loadAverageStart = round(loadavg()[0] ?? 0, 2)
  const primary = yield* startSwitchableProvider({
    name: "primary",
    apiKey: "sk-bench-primary-000000000001",
    latencyMs: providerLatencyMs,
    content: answerForPrompt
  })
  const backup = yield* startSwitchableProvider({
    name: "backup",
    apiKey: "sk-bench-backup-0000000000002",
    latencyMs: providerLatencyMs,
    content: answerForPrompt
  })
  const storage = yield* engineStorage("bench_failover")
  const pool = yield* rawPool(storage.databaseUrl, 2)
  const env = engineEnv(storage, {
    AI_GATEWAY: "openai",
    AI_PROVIDERS: JSON.stringify({
      primary: { baseUrl: primary.baseUrl, apiKeyEnv: "PRIMARY_KEY" },
      backup: { baseUrl: backup.baseUrl, apiKeyEnv: "BACKUP_KEY" }
    }),
    PRIMARY_KEY: primary.apiKey,
    BACKUP_KEY: backup.apiKey,
    AI_PROVIDER: "primary",
    AI_MODEL_ROUTES: JSON.stringify({
      "*:platform_key": { fallbacks: [{ provider: "backup", model: "backup-model" }] }
    }),
    ...processBenchEnv
  })
  yield* step("starting API, dispatcher and two workers")
  const [api] = yield* Effect.all(
    [
      startProgram("api", "api", env),
      startProgram("dispatcher", "dispatcher", env, { ready: dispatcherStarted }),
      startProgram("worker", "worker-1", { ...env, WORKER_ID: "bench-failover-1" }, { ready: workerStarted }),
      startProgram("worker", "worker-2", { ...env, WORKER_ID: "bench-failover-2" }, { ready: workerStarted })
    ],
    { concurrency: "unbounded" }
  )
  const clients = yield* Effect.forEach(
    Array.from({ length: s.users }, (_, i) => i),
    (i) =>
      Effect.flatMap(
        tokenFor(storage, `bench-failover-user-${i}`),
        (token) => makeAiJobClient({ baseUrl: api.baseUrl, token })
      )
  )

  const created: Record<Phase, Array<string>> = { before: [], during: [], after: [] }
  let index = 0
  const create = (phase: Phase) =>
    Effect.suspend(() => {
      const i = index++
      const client = clients[i % clients.length]
      if (client === undefined) return Effect.die(new Error("no client"))
      return client.jobs.createFlashcardGeneration({ payload: flashcardRequest(i), headers: {} }).pipe(
        Effect.retry(Schedule.intersect(Schedule.exponential("50 millis"), Schedule.recurs(5))),
        Effect.tap((job) => Effect.sync(() => void created[phase].push(job.jobId))),
        Effect.orDie
      )
    })
  const perPhase = Math.round(s.phaseSeconds * s.rate)
  const outage = { startedAt: 0, endedAt: 0 }
  for (const phase of phases) {
    if (phase === "during") {
      yield* primary.setDown(true)
      outage.startedAt = performance.now()
    }
    if (phase === "after") {
      yield* primary.setDown(false)
      outage.endedAt = performance.now()
    }
    yield* step(`${phase} the outage: ${perPhase} jobs at ${s.rate}/s`)
    yield* runPaced(perPhase, s.rate, () => create(phase))
  }

  yield* step("waiting for every job to end")
  const all = [...created.before, ...created.during, ...created.after]
  const rowsOf = (ids: ReadonlyArray<string>) =>
    queryAs(
      pool,
      JobRow,
      `SELECT CAST(id AS CHAR) AS id, lifecycle_status AS status, error_code AS errorCode,
         TIMESTAMPDIFF(MICROSECOND, created_at, finished_at) / 1000 AS ms
       FROM ai_job WHERE id IN (${ids.map(() => "?").join(",")})`,
      [...ids]
    )
  const unfinished = Effect.map(
    rowsOf(all),
    (rows) => rows.filter((row) => !["succeeded", "failed", "cancelled"].includes(row.status)).length
  )
  yield* unfinished.pipe(
    Effect.repeat({ until: (left) => left === 0, schedule: Schedule.spaced(Duration.seconds(1)) }),
    Effect.timeout(Duration.minutes(5))
  )

  const figures = yield* Effect.forEach(phases, (phase) =>
    Effect.map(rowsOf(created[phase]), (rows) => {
      const succeeded = rows.filter((row) => row.status === "succeeded").map((row) => row.ms ?? 0)
      return {
        phase,
        jobs: rows.length,
        failed: rows.filter((row) => row.status !== "succeeded").length,
        p50Ms: round(percentile(succeeded, 50), 0),
        p95Ms: round(percentile(succeeded, 95), 0)
      }
    }))
  const deadCalls = (yield* primary.calls).filter((call) => call.down).length
  const outageMinutes = (outage.endedAt - outage.startedAt) / 60_000
  const deadCallsPerMinute = round(deadCalls / outageMinutes, 2)
  const backupCalls = (yield* backup.calls).length
  const failed = figures.reduce((sum, row) => sum + row.failed, 0)

  const lines = [
    `bench:failover: ${all.length} jobs at ${s.rate}/s, provider answers in ${providerLatencyMs} ms, a ${
      round(outageMinutes * 60, 0)
    } s outage of the primary in the middle`,
    ...figures.map((row) =>
      `  ${
        row.phase.padEnd(6)
      } the outage: ${row.jobs} jobs, create → succeeded p50 ${row.p50Ms} ms, p95 ${row.p95Ms} ms, ${row.failed} not succeeded`
    ),
    `  calls to the dead primary: ${deadCalls} in ${
      round(outageMinutes, 2)
    } min = ${deadCallsPerMinute} a minute; calls to the backup: ${backupCalls}`,
    `  [${failed <= maxFailedJobs ? "MET" : "MISSED"}] jobs failed: ${failed} (target ${maxFailedJobs})`,
    `  [${
      deadCallsPerMinute <= maxDeadCallsPerMinute ? "MET" : "MISSED"
    }] calls to the dead provider: ${deadCallsPerMinute} a minute (target ≤ ${maxDeadCallsPerMinute})`,
    `  load average ${loadAverageStart} → ${round(loadavg()[0] ?? 0, 2)} (2 cores)`
  ]
  yield* Effect.sync(() => console.log(lines.join("\n")))
  yield* Effect.promise(async () => {
    await mkdir(fileURLToPath(new URL("./results/", import.meta.url)), { recursive: true })
    await writeFile(
      resultsFile,
      JSON.stringify({ figures, deadCalls, deadCallsPerMinute, backupCalls, failed }, null, 2)
    )
  })
})

NodeRuntime.runMain(program.pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)))
