/**
 * `npm run bench`: the engine against raw BullMQ and raw MySQL, measured in one run on the
 * local MariaDB and Redis, printed as a table and written to bench/results/latest.json.
 *
 * The run owns a scratch database (created, migrated, dropped at the end) and a Redis key
 * prefix (its keys deleted at the end). Parts, in order: raw BullMQ, raw MySQL, the engine end
 * to end (full load, then half of the measured maximum) with SQL counted, raw BullMQ at the
 * half-load rate, the hand-written floor (the engine's statements with mysql2 and BullMQ, at full
 * and half load), HTTP, and worker memory, which gets whatever budget is left.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Logger, LogLevel, Schema } from "effect"
import { mkdir, writeFile } from "node:fs/promises"
import { availableParallelism, loadavg } from "node:os"
import { fileURLToPath } from "node:url"
import { runBullMqPaced, runBullMqThroughput } from "./bullmqBaseline.js"
import { runDurableFloor } from "./durableFloor.js"
import { runEngineBench } from "./engine.js"
import { benchEngineLayer, startDispatcherAndWorker } from "./engineStack.js"
import { runHttpBench } from "./http.js"
import { monoMillis, queryAs, rawPool, redisNamespace, scratchDatabase } from "./infra.js"
import { runMemoryBench } from "./memory.js"
import { runMysqlBaseline } from "./mysqlBaseline.js"
import { type BenchResults, renderReport, targetsOf } from "./report.js"
import { loadBenchSettings } from "./settings.js"
import { makeSqlCounter } from "./sqlCounter.js"
import { round } from "./stats.js"

const resultsFile = fileURLToPath(new URL("./results/latest.json", import.meta.url))

const step = (label: string) => Effect.sync(() => process.stderr.write(`bench: ${label}\n`))

const program = Effect.gen(function*() {
  const settings = yield* loadBenchSettings
  const began = yield* monoMillis
  const elapsed = Effect.map(monoMillis, (now) => (now - began) / 1000)
  const startedAt = new Date().toISOString()
  const loadAverageStart = round(loadavg()[0] ?? 0, 2)
  const skipped: Array<string> = []

  yield* step("scratch database and Redis prefix")
  const database = yield* scratchDatabase(settings.serverUrl)
  const redisPrefix = yield* redisNamespace(settings.redisUrl)
  const target = { ...database, redisUrl: settings.redisUrl, redisPrefix }
  const pool = yield* rawPool(database.databaseUrl, 2)

  yield* step(`raw BullMQ: ${settings.jobs} jobs`)
  const bullmq = yield* runBullMqThroughput({
    redisUrl: settings.redisUrl,
    prefix: `${redisPrefix}:raw`,
    jobs: settings.jobs,
    concurrency: settings.concurrency
  })

  yield* step(`raw MySQL: ${settings.jobs} create-shaped transactions`)
  const mysql = yield* runMysqlBaseline({
    databaseUrl: database.databaseUrl,
    transactions: settings.jobs,
    concurrency: settings.concurrency
  })

  yield* step(`engine end to end: ${settings.jobs} jobs at full load, then half load`)
  const counter = makeSqlCounter()
  const engine = yield* Effect.gen(function*() {
    yield* startDispatcherAndWorker("bench-worker")
    return yield* runEngineBench({
      pool,
      counter,
      jobs: settings.jobs,
      concurrency: settings.concurrency,
      halfLoadSeconds: settings.halfLoadSeconds
    })
  }).pipe(
    Effect.scoped,
    Effect.provide(benchEngineLayer(target, { workerConcurrency: settings.concurrency })),
    Effect.withTracer(counter.tracer)
  )

  yield* step(`raw BullMQ at the half-load rate (${engine.halfLoad.targetPerSecond}/s)`)
  const bullmqHalfLoad = yield* runBullMqPaced({
    redisUrl: settings.redisUrl,
    prefix: `${redisPrefix}:raw`,
    ratePerSecond: engine.halfLoad.targetPerSecond,
    seconds: Math.min(5, settings.halfLoadSeconds),
    concurrency: settings.concurrency
  })

  yield* step(
    `hand-written floor (mysql2 + BullMQ, the engine's statements): ${settings.jobs} jobs, then ${engine.halfLoad.targetPerSecond}/s`
  )
  const floor = yield* runDurableFloor({
    databaseUrl: database.databaseUrl,
    redisUrl: settings.redisUrl,
    prefix: `${redisPrefix}:floor`,
    jobs: settings.jobs,
    concurrency: settings.concurrency,
    halfLoad: { ratePerSecond: engine.halfLoad.targetPerSecond, seconds: settings.halfLoadSeconds }
  })

  let http: BenchResults["http"] = null
  if ((yield* elapsed) + 3 * (settings.httpSeconds + 8) < settings.budgetSeconds - 30) {
    const [job] = yield* queryAs(
      pool,
      Schema.Struct({ id: Schema.String, userId: Schema.String }),
      "SELECT id, user_id AS userId FROM ai_job WHERE target_type = 'bench_full' AND lifecycle_status = 'succeeded' LIMIT 1"
    )
    if (job === undefined) {
      skipped.push("HTTP: no succeeded job to read")
    } else {
      yield* step(
        `HTTP: GET /api/ai/jobs/:jobId, ${settings.httpSeconds} s each against the engine API and a bare handler`
      )
      http = yield* runHttpBench({
        target,
        jobId: job.id,
        userId: job.userId,
        connections: settings.concurrency,
        seconds: settings.httpSeconds
      })
    }
  } else {
    skipped.push("HTTP: not enough of the time budget left")
  }

  let memory: BenchResults["memory"] = null
  const memoryBudget = settings.budgetSeconds - (yield* elapsed) - 10
  if (memoryBudget > 40) {
    yield* step(`worker memory (budget ${Math.round(memoryBudget)} s)`)
    memory = yield* runMemoryBench({
      target,
      pool,
      concurrency: settings.concurrency,
      firstJobs: settings.memoryJobsFirst,
      secondJobs: settings.memoryJobsSecond,
      budgetSeconds: memoryBudget
    })
  } else {
    skipped.push(`memory: only ${Math.round(memoryBudget)} s of the budget left`)
  }

  const results: BenchResults = {
    startedAt,
    machine: {
      cpus: availableParallelism(),
      node: process.version,
      platform: `${process.platform}-${process.arch}`,
      loadAverageStart,
      loadAverageEnd: round(loadavg()[0] ?? 0, 2)
    },
    settings: {
      jobs: settings.jobs,
      concurrency: settings.concurrency,
      halfLoadSeconds: settings.halfLoadSeconds,
      httpSeconds: settings.httpSeconds,
      budgetSeconds: settings.budgetSeconds,
      mysqlPool: 10,
      users: 1000,
      logLevel: "Warning"
    },
    bullmq,
    mysql,
    engine,
    bullmqHalfLoad,
    floor,
    http,
    memory,
    skipped,
    durationSeconds: Math.round(yield* elapsed)
  }
  yield* Effect.promise(async () => {
    await mkdir(fileURLToPath(new URL("./results/", import.meta.url)), { recursive: true })
    await writeFile(resultsFile, JSON.stringify({ ...results, targets: targetsOf(results) }, null, 2) + "\n")
  })
  yield* Effect.sync(() => process.stdout.write(renderReport(results) + `\n\nwritten: bench/results/latest.json\n`))
  yield* step("cleaning up (scratch database, Redis keys)")
}).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning))

NodeRuntime.runMain(program)
