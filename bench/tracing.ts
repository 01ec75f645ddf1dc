/**
 * `npm run bench:tracing`: what tracing costs. The engine (API service, dispatcher, worker, on
 * the local MariaDB and Redis, the instant synthetic provider) runs the same load in alternating
 * rounds: tracing off (no endpoint: nothing exported) and tracing on, exporting every span over
 * OTLP/HTTP (protobuf, batched) to a receiver in another process. Throughput is jobs per second
 * from the first create to the last finish, read from the database clock. Prints the table and
 * writes bench/results/tracing.json.
 */
import { type ChildProcessByStdio, spawn } from "node:child_process"
import type { Readable, Writable } from "node:stream"
import { mkdir, writeFile } from "node:fs/promises"
import { availableParallelism, loadavg } from "node:os"
import { fileURLToPath } from "node:url"
import { NodeRuntime } from "@effect/platform-node"
import { Config, Effect, Layer, Logger, LogLevel, Schema } from "effect"
import { otlpTracing } from "../src/layers/telemetry/Tracing.js"
import { AiJobService } from "../src/services/AiJobService.js"
import { awaitTerminal } from "./engine.js"
import { benchEngineLayer, startDispatcherAndWorker } from "./engineStack.js"
import { queryAs, rawPool, redisNamespace, scratchDatabase } from "./infra.js"
import { round } from "./stats.js"

const resultsFile = fileURLToPath(new URL("./results/tracing.json", import.meta.url))
const step = (label: string) => Effect.sync(() => process.stderr.write(`bench:tracing: ${label}\n`))

const settings = Config.all({
  serverUrl: Config.string("BENCH_DATABASE_URL").pipe(Config.withDefault("mysql://root@127.0.0.1:3306/test")),
  redisUrl: Config.string("BENCH_REDIS_URL").pipe(Config.withDefault("redis://127.0.0.1:6379")),
  jobs: Config.integer("BENCH_TRACING_JOBS").pipe(Config.withDefault(600)),
  rounds: Config.integer("BENCH_TRACING_ROUNDS").pipe(Config.withDefault(3)),
  concurrency: Config.integer("BENCH_CONCURRENCY").pipe(Config.withDefault(16))
})

/** A receiver in its own process that reads and counts OTLP requests (spans are not decoded). */
const receiverScript = `
const http = require("node:http")
let requests = 0, bytes = 0
const server = http.createServer((req, res) => {
  req.on("data", (c) => { bytes += c.length })
  req.on("end", () => { requests++; res.writeHead(200, { "content-type": "application/x-protobuf" }).end() })
})
server.listen(0, "127.0.0.1", () => process.stdout.write("port " + server.address().port + "\\n"))
process.stdin.on("data", () => process.stdout.write("stats " + requests + " " + bytes + "\\n"))
process.stdin.on("end", () => process.exit(0))
`

const startReceiver = Effect.acquireRelease(
  Effect.async<{
    readonly port: number
    readonly child: ChildProcessByStdio<Writable, Readable, null>
    readonly stats: Effect.Effect<{ requests: number; bytes: number }>
  }>((resume) => {
    const child = spawn(process.execPath, ["-e", receiverScript], { stdio: ["pipe", "pipe", "inherit"] })
    let buffered = ""
    let waiting: ((s: { requests: number; bytes: number }) => void) | undefined
    child.stdout.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("utf8")
      let newline = buffered.indexOf("\n")
      while (newline !== -1) {
        const line = buffered.slice(0, newline)
        buffered = buffered.slice(newline + 1)
        const [kind, a = "0", b = "0"] = line.split(" ")
        if (kind === "port") {
          resume(Effect.succeed({
            port: Number(a),
            child,
            stats: Effect.async<{ requests: number; bytes: number }>((done) => {
              waiting = (s) => done(Effect.succeed(s))
              child.stdin.write("?\n")
            })
          }))
        } else if (kind === "stats") {
          waiting?.({ requests: Number(a), bytes: Number(b) })
        }
        newline = buffered.indexOf("\n")
      }
    })
  }),
  (receiver) => Effect.sync(() => receiver.child.stdin.end())
)

const Window = Schema.Struct({ seconds: Schema.Number, failed: Schema.Number })

const program = Effect.gen(function* () {
  const s = yield* settings
  const database = yield* scratchDatabase(s.serverUrl)
  const redisPrefix = yield* redisNamespace(s.redisUrl)
  const target = { ...database, redisUrl: s.redisUrl, redisPrefix }
  const pool = yield* rawPool(database.databaseUrl, 2)
  const receiver = yield* startReceiver
  const tracing = otlpTracing("ai-job-engine-bench", {
    tracesUrl: `http://127.0.0.1:${receiver.port}/v1/traces`,
    protocol: "http/protobuf",
    sampler: "parentbased_always_on",
    samplerRatio: 1
  })

  const runRound = (label: string, traced: boolean) =>
    Effect.gen(function* () {
      const service = yield* AiJobService
      yield* startDispatcherAndWorker(`bench-tracing-${label}`)
      const create = (phase: string, i: number) =>
        service
          .createJob({
            userId: `bench-user-${i % 1000}`,
            jobType: "synthetic_echo",
            targetType: phase,
            targetId: String(i),
            input: { message: `bench ${phase} ${i}` }
          })
          .pipe(Effect.retry({ times: 5 }), Effect.orDie)
      const warm = `warm_${label}`
      yield* Effect.forEach(Array.from({ length: 100 }, (_, i) => i), (i) => create(warm, i), { concurrency: s.concurrency, discard: true })
      yield* awaitTerminal(pool, warm, 100, "60 seconds")
      const phase = `run_${label}`
      yield* Effect.forEach(Array.from({ length: s.jobs }, (_, i) => i), (i) => create(phase, i), { concurrency: s.concurrency, discard: true })
      yield* awaitTerminal(pool, phase, s.jobs, "240 seconds")
      const [window] = yield* queryAs(
        pool,
        Window,
        `SELECT CAST(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), MAX(finished_at)) AS SIGNED) / 1e6 AS seconds,
                CAST(COALESCE(SUM(lifecycle_status <> 'succeeded'), 0) AS SIGNED) AS failed
           FROM ai_job WHERE target_type = ?`,
        [phase]
      )
      const seconds = Math.max(0.001, Number(window?.seconds ?? 0))
      return { label, traced, jobs: s.jobs, seconds: round(seconds, 3), perSecond: round(s.jobs / seconds, 1), failed: window?.failed ?? 0 }
    }).pipe(
      Effect.scoped,
      Effect.provide(benchEngineLayer(target, { workerConcurrency: s.concurrency })),
      Effect.provide(traced ? Layer.discard(tracing) : Layer.empty)
    )

  const rounds: Array<{ label: string; traced: boolean; jobs: number; seconds: number; perSecond: number; failed: number }> = []
  for (let r = 0; r < s.rounds; r++) {
    for (const traced of [false, true]) {
      const label = `${traced ? "on" : "off"}_${r + 1}`
      yield* step(`round ${label}: ${s.jobs} jobs`)
      rounds.push(yield* runRound(label, traced))
    }
  }
  const mean = (traced: boolean) => {
    const of = rounds.filter((x) => x.traced === traced)
    return of.reduce((sum, x) => sum + x.perSecond, 0) / Math.max(1, of.length)
  }
  const off = mean(false)
  const on = mean(true)
  const exported = yield* receiver.stats
  const results = {
    startedAt: new Date().toISOString(),
    machine: { cpus: availableParallelism(), node: process.version, loadAverage: round(loadavg()[0] ?? 0, 2) },
    settings: s,
    rounds,
    offPerSecond: round(off, 1),
    onPerSecond: round(on, 1),
    costPercent: round(((off - on) / off) * 100, 1),
    exported
  }
  yield* Effect.promise(async () => {
    await mkdir(fileURLToPath(new URL("./results/", import.meta.url)), { recursive: true })
    await writeFile(resultsFile, JSON.stringify(results, null, 2) + "\n")
  })
  const lines = [
    "| round | tracing | jobs | seconds | jobs/s | not succeeded |",
    "|---|---|---|---|---|---|",
    ...rounds.map((x) => `| ${x.label} | ${x.traced ? "on (OTLP/HTTP protobuf)" : "off"} | ${x.jobs} | ${x.seconds} | ${x.perSecond} | ${x.failed} |`),
    "",
    `throughput, mean of rounds: off ${results.offPerSecond}/s, on ${results.onPerSecond}/s: tracing costs ${results.costPercent} %`,
    `exported: ${exported.requests} OTLP requests, ${Math.round(exported.bytes / 1024)} KiB`
  ]
  yield* Effect.sync(() => process.stdout.write(lines.join("\n") + "\n\nwritten: bench/results/tracing.json\n"))
}).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning))

NodeRuntime.runMain(program)
