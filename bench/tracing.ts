/**
 * `npm run bench:tracing`: what tracing costs. The engine (API service, dispatcher, worker, on
 * the local MariaDB and Redis, the instant synthetic provider) runs the same load in interleaved
 * rounds: tracing off (no endpoint: nothing exported), then on, exporting over OTLP/HTTP (protobuf,
 * batched, no `sql.*` spans unless `TRACE_SQL=true`) to a receiver in another process, and again.
 * Throughput is jobs per second from the first create to the last finish, read from the database
 * clock. Each off round and the on round after it form a pair; the cost is the pairs' geometric
 * mean slow-down, and "tracing cost < 10 %" is [MET] only when its one-sided 95 % upper bound
 * (Student's t over the log ratios) is below 10 %. Prints the rounds, the medians, CPU, spans and bytes exported per job; writes
 * bench/results/tracing.json. Sizes: BENCH_TRACING_JOBS (1500), BENCH_TRACING_ROUNDS (6 per side).
 */
import { NodeRuntime } from "@effect/platform-node"
import { Config, Effect, Layer, Logger, LogLevel, Schema } from "effect"
import { type ChildProcessByStdio, spawn } from "node:child_process"
import { mkdir, writeFile } from "node:fs/promises"
import { availableParallelism, loadavg } from "node:os"
import type { Readable, Writable } from "node:stream"
import { fileURLToPath } from "node:url"
import { otlpTracing } from "../src/layers/telemetry/Tracing.js"
import { AiJobService } from "../src/services/AiJobService.js"
import { awaitTerminal } from "./engine.js"
import { benchEngineLayer, startDispatcherAndWorker } from "./engineStack.js"
import { queryAs, rawPool, redisNamespace, scratchDatabase } from "./infra.js"
import { meanWithBounds, median, ratio, round } from "./stats.js"

const resultsFile = fileURLToPath(new URL("./results/tracing.json", import.meta.url))
const step = (label: string) => Effect.sync(() => process.stderr.write(`bench:tracing: ${label}\n`))

const settings = Config.all({
  serverUrl: Config.string("BENCH_DATABASE_URL").pipe(Config.withDefault("mysql://root@127.0.0.1:3306/test")),
  redisUrl: Config.string("BENCH_REDIS_URL").pipe(Config.withDefault("redis://127.0.0.1:6379")),
  jobs: Config.integer("BENCH_TRACING_JOBS").pipe(Config.withDefault(1_500)),
  rounds: Config.integer("BENCH_TRACING_ROUNDS").pipe(Config.withDefault(6)),
  concurrency: Config.integer("BENCH_CONCURRENCY").pipe(Config.withDefault(16)),
  /** `TRACE_SQL=true` measures the cost with @effect/sql's spans exported too. */
  sqlSpans: Config.boolean("TRACE_SQL").pipe(Config.withDefault(false))
})

/**
 * A receiver in its own process: it answers every OTLP/HTTP request and counts requests, bytes and
 * spans. Spans are counted by walking the protobuf wire format of ExportTraceServiceRequest
 * (resource_spans = 1 → scope_spans = 2 → spans = 2), without decoding the spans themselves.
 */
const receiverScript = `
const http = require("node:http")
let requests = 0, bytes = 0, spans = 0, unreadable = 0
const varint = (buf, at) => { let value = 0, shift = 0, byte; do { byte = buf[at++]; value += (byte & 0x7f) * 2 ** shift; shift += 7 } while (byte & 0x80); return [value, at] }
const fields = (buf, start, end, wanted, each) => {
  let at = start
  while (at < end) {
    let key; [key, at] = varint(buf, at)
    const field = Math.floor(key / 8), wire = key & 7
    if (wire === 0) { [, at] = varint(buf, at) }
    else if (wire === 1) { at += 8 }
    else if (wire === 5) { at += 4 }
    else if (wire === 2) { let length; [length, at] = varint(buf, at); if (field === wanted) each(at, at + length); at += length }
    else { return }
  }
}
const countSpans = (buf) => {
  let n = 0
  fields(buf, 0, buf.length, 1, (rs, re) => fields(buf, rs, re, 2, (ss, se) => fields(buf, ss, se, 2, () => { n++ })))
  return n
}
const server = http.createServer((req, res) => {
  const chunks = []
  req.on("data", (c) => { chunks.push(c); bytes += c.length })
  req.on("end", () => {
    requests++
    try { spans += countSpans(Buffer.concat(chunks)) } catch { unreadable++ }
    res.writeHead(200, { "content-type": "application/x-protobuf" }).end()
  })
})
server.listen(0, "127.0.0.1", () => process.stdout.write("port " + server.address().port + "\\n"))
process.stdin.on("data", () => process.stdout.write("stats " + requests + " " + bytes + " " + spans + " " + unreadable + "\\n"))
process.stdin.on("end", () => process.exit(0))
`

interface Exported {
  readonly requests: number
  readonly bytes: number
  readonly spans: number
  /** Requests whose body did not parse as protobuf (their spans are not counted). */
  readonly unreadable: number
}

const startReceiver = Effect.acquireRelease(
  Effect.async<{
    readonly port: number
    readonly child: ChildProcessByStdio<Writable, Readable, null>
    readonly stats: Effect.Effect<Exported>
  }>((resume) => {
    const child = spawn(process.execPath, ["-e", receiverScript], { stdio: ["pipe", "pipe", "inherit"] })
    let buffered = ""
    let waiting: ((s: Exported) => void) | undefined
    child.stdout.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("utf8")
      let newline = buffered.indexOf("\n")
      while (newline !== -1) {
        const line = buffered.slice(0, newline)
        buffered = buffered.slice(newline + 1)
        const [kind, a = "0", b = "0", c = "0", d = "0"] = line.split(" ")
        if (kind === "port") {
          resume(Effect.succeed({
            port: Number(a),
            child,
            stats: Effect.async<Exported>((done) => {
              waiting = (s) => done(Effect.succeed(s))
              child.stdin.write("?\n")
            })
          }))
        } else if (kind === "stats") {
          waiting?.({ requests: Number(a), bytes: Number(b), spans: Number(c), unreadable: Number(d) })
        }
        newline = buffered.indexOf("\n")
      }
    })
  }),
  (receiver) => Effect.sync(() => receiver.child.stdin.end())
)

const Window = Schema.Struct({ seconds: Schema.Number, failed: Schema.Number })

/** Jobs each round runs before the measured ones (connections, JIT, the first queue adds). */
const warmJobs = 100
/** The aim of issue 15: exporting traces costs less than this share of throughput. */
const aimPercent = 10

const signed = (n: number) => (n > 0 ? `+${n}` : String(n))

interface Round {
  readonly label: string
  readonly traced: boolean
  readonly jobs: number
  readonly seconds: number
  readonly perSecond: number
  readonly failed: number
  /** CPU time of this process (engine and tracing; not the databases, not the receiver) per job, warm-up included. */
  readonly cpuMsPerJob: number
  /** What the receiver got during the round, warm-up jobs included (zero when tracing is off). */
  readonly exported: Exported
}

const program = Effect.gen(function*() {
  const s = yield* settings
  const loadAverageStart = round(loadavg()[0] ?? 0, 2)
  const database = yield* scratchDatabase(s.serverUrl)
  const redisPrefix = yield* redisNamespace(s.redisUrl)
  const target = { ...database, redisUrl: s.redisUrl, redisPrefix }
  const pool = yield* rawPool(database.databaseUrl, 2)
  const receiver = yield* startReceiver
  // What a process gets from OTEL_EXPORTER_OTLP_ENDPOINT alone: protobuf, default batch, no sql.* spans.
  const tracing = otlpTracing("ai-job-engine-bench", {
    tracesUrl: `http://127.0.0.1:${receiver.port}/v1/traces`,
    protocol: "http/protobuf",
    sampler: "parentbased_always_on",
    samplerRatio: 1
  }, { sqlSpans: s.sqlSpans })

  const runRound = (label: string, traced: boolean) =>
    Effect.gen(function*() {
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
      yield* Effect.forEach(Array.from({ length: warmJobs }, (_, i) => i), (i) => create(warm, i), {
        concurrency: s.concurrency,
        discard: true
      })
      yield* awaitTerminal(pool, warm, warmJobs, "60 seconds")
      const phase = `run_${label}`
      yield* Effect.forEach(Array.from({ length: s.jobs }, (_, i) => i), (i) => create(phase, i), {
        concurrency: s.concurrency,
        discard: true
      })
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
      return { seconds: round(seconds, 3), perSecond: round(s.jobs / seconds, 1), failed: window?.failed ?? 0 }
    }).pipe(
      Effect.scoped,
      Effect.provide(benchEngineLayer(target, { workerConcurrency: s.concurrency })),
      // The tracing layer closes with the round: its last batch is flushed before the count below.
      Effect.provide(traced ? tracing : Layer.empty)
    )

  // The first round of a process ran a third to a half slower whatever its side (JIT, pools,
  // caches): one round, tracing on so both code paths are compiled, is run first and not counted.
  yield* step(`round warm-up (not counted): ${warmJobs} + ${s.jobs} jobs`)
  yield* runRound("warmup", true)
  // Interleaved (off, on, off, on, ...) so a change in the machine's load hits both sides alike.
  const rounds: Array<Round> = []
  for (let r = 0; r < s.rounds; r++) {
    for (const traced of [false, true]) {
      const label = `${traced ? "on" : "off"}_${r + 1}`
      yield* step(`round ${label}: ${warmJobs} + ${s.jobs} jobs`)
      const before = yield* receiver.stats
      const cpuBefore = process.cpuUsage()
      const measured = yield* runRound(label, traced)
      const cpu = process.cpuUsage(cpuBefore)
      const after = yield* receiver.stats
      const exported: Exported = {
        requests: after.requests - before.requests,
        bytes: after.bytes - before.bytes,
        spans: after.spans - before.spans,
        unreadable: after.unreadable - before.unreadable
      }
      const cpuMsPerJob = round((cpu.user + cpu.system) / 1000 / (warmJobs + s.jobs), 2)
      rounds.push({ label, traced, jobs: s.jobs, ...measured, cpuMsPerJob, exported })
    }
  }
  const offRounds = rounds.filter((x) => !x.traced)
  const onRounds = rounds.filter((x) => x.traced)
  const off = median(offRounds.map((x) => x.perSecond))
  const on = median(onRounds.map((x) => x.perSecond))
  const costPercent = off === 0 ? 0 : round(((off - on) / off) * 100, 1)
  // How far apart the rounds of one side are: a cost smaller than this is not shown by the run.
  const spreadOf = (of: ReadonlyArray<Round>) => {
    const values = of.map((x) => x.perSecond)
    const middle = median(values)
    return middle === 0 ? 0 : round(((Math.max(...values) - Math.min(...values)) / middle) * 100, 1)
  }
  // CPU per job moves less with other work on the machine than throughput does.
  const offCpu = round(median(offRounds.map((x) => x.cpuMsPerJob)), 2)
  const onCpu = round(median(onRounds.map((x) => x.cpuMsPerJob)), 2)
  const cpuCostPercent = offCpu === 0 ? 0 : round(((onCpu - offCpu) / offCpu) * 100, 1)
  const offSpreadPercent = spreadOf(offRounds)
  const onSpreadPercent = spreadOf(onRounds)
  const spreadPercent = Math.max(offSpreadPercent, onSpreadPercent)
  const exportedJobs = onRounds.length * (warmJobs + s.jobs)
  const exportedTotal = onRounds.reduce(
    (sum, x) => ({
      requests: sum.requests + x.exported.requests,
      bytes: sum.bytes + x.exported.bytes,
      spans: sum.spans + x.exported.spans,
      unreadable: sum.unreadable + x.exported.unreadable
    }),
    { requests: 0, bytes: 0, spans: 0, unreadable: 0 }
  )
  const spansPerJob = round(exportedTotal.spans / Math.max(1, exportedJobs), 1)
  const bytesPerJob = Math.round(exportedTotal.bytes / Math.max(1, exportedJobs))
  const loadAverageEnd = round(loadavg()[0] ?? 0, 2)
  // Rounds run in interleaved pairs (off_r, on_r), so each pair sees the same machine. A pair's
  // speed ratio is averaged as a logarithm (a round twice as fast and one half as fast cancel out),
  // and "under the aim" needs the 95 % bound of the cost below it, not one lucky median.
  const logRatios = offRounds.flatMap((offRound, r) => {
    const onRound = onRounds[r]
    return onRound === undefined || offRound.perSecond === 0 || onRound.perSecond === 0
      ? []
      : [Math.log(onRound.perSecond / offRound.perSecond)]
  })
  const costOf = (logRatio: number) => (1 - Math.exp(logRatio)) * 100
  const pairCosts = logRatios.map(costOf)
  const bounds = meanWithBounds(logRatios)
  const pairCost = { mean: costOf(bounds.mean), upper95: costOf(bounds.lower95) }
  const pairMean = round(pairCost.mean, 1)
  const pairUpper = round(pairCost.upper95, 1)
  const met = pairCost.upper95 < aimPercent
  const reasons = [
    ...(pairCosts.length < 2 ? ["not shown: one round per side says nothing of the noise; run 3 or more"] : []),
    ...(pairCosts.length >= 2 && pairCost.mean >= aimPercent
      ? [
        `tracing on ran at ${round(on, 1)} jobs/s against ${
          round(off, 1)
        } off (medians of ${onRounds.length} and ${offRounds.length} rounds); CPU per job ${signed(cpuCostPercent)} %`
      ]
      : []),
    ...(pairCosts.length >= 2 && pairCost.mean < aimPercent
      ? [
        `not shown: the paired rounds leave the cost anywhere up to ${pairUpper} % (rounds of one side differ by up to ${spreadPercent} %); run more rounds, on a quieter machine`
      ]
      : []),
    ...(Math.max(loadAverageStart, loadAverageEnd) > availableParallelism()
      ? [
        `load average ${loadAverageStart} → ${loadAverageEnd} on ${availableParallelism()} CPUs: the machine was busy with other work`
      ]
      : [])
  ]
  const results = {
    startedAt: new Date().toISOString(),
    machine: { cpus: availableParallelism(), node: process.version, loadAverageStart, loadAverageEnd },
    settings: { ...s, warmJobs },
    rounds,
    offPerSecondMedian: round(off, 1),
    onPerSecondMedian: round(on, 1),
    costPercent,
    pairedCostPercent: { rounds: pairCosts.map((c) => round(c, 1)), mean: pairMean, upper95: pairUpper },
    cpuMsPerJobMedian: { off: offCpu, on: onCpu, costPercent: cpuCostPercent },
    offSpreadPercent,
    onSpreadPercent,
    exported: { ...exportedTotal, jobs: exportedJobs, spansPerJob, bytesPerJob },
    target: { name: `tracing cost < ${aimPercent} %`, met, value: pairMean, upper95: pairUpper }
  }
  yield* Effect.promise(async () => {
    await mkdir(fileURLToPath(new URL("./results/", import.meta.url)), { recursive: true })
    await writeFile(resultsFile, JSON.stringify(results, null, 2) + "\n")
  })
  const lines = [
    `tracing cost: ${availableParallelism()} CPUs, Node ${process.version}, load average ${loadAverageStart} at start, ${loadAverageEnd} at end`,
    `exporting: OTLP/HTTP protobuf, batched, to a receiver in another process; sql.* spans ${
      s.sqlSpans ? "on (TRACE_SQL=true)" : "off (the default)"
    }`,
    "",
    "| round | tracing | jobs | seconds | jobs/s | not succeeded | CPU ms/job | spans | KiB |",
    "|---|---|---|---|---|---|---|---|---|",
    ...rounds.map((x) =>
      `| ${x.label} | ${
        x.traced ? "on" : "off"
      } | ${x.jobs} | ${x.seconds} | ${x.perSecond} | ${x.failed} | ${x.cpuMsPerJob} | ${x.exported.spans} | ${
        round(x.exported.bytes / 1024, 1)
      } |`
    ),
    "",
    `throughput, median of rounds: off ${results.offPerSecondMedian}/s, on ${results.onPerSecondMedian}/s; ratio on/off ${
      ratio(on, off)
    }: tracing costs ${costPercent} %` +
    ` (rounds of one side differ by up to ${offSpreadPercent} % off, ${onSpreadPercent} % on)`,
    `paired rounds (on_r against off_r): slow-down ${
      pairCosts.map((c) => `${round(c, 1)} %`).join(", ")
    }; geometric mean ${pairMean} %, at most ${pairUpper} % at 95 % confidence`,
    `CPU per job in the engine's process, median of rounds: off ${offCpu} ms, on ${onCpu} ms (${
      signed(cpuCostPercent)
    } %)`,
    `exported per job: ${spansPerJob} spans, ${bytesPerJob} bytes (${exportedTotal.spans} spans, ${
      Math.round(exportedTotal.bytes / 1024)
    } KiB in ${exportedTotal.requests} requests for ${exportedJobs} jobs, warm-up included` +
    `${
      exportedTotal.unreadable > 0 ? `; ${exportedTotal.unreadable} requests unreadable, their spans not counted` : ""
    })`,
    "",
    `[${met ? "MET" : "MISSED"}] tracing cost < ${aimPercent} %: ${pairMean} % (95 % upper bound ${pairUpper} %)` +
    (met ? "" : `\n         why: ${reasons.join("; ")}`)
  ]
  yield* Effect.sync(() => process.stdout.write(lines.join("\n") + "\n\nwritten: bench/results/tracing.json\n"))
}).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning))

NodeRuntime.runMain(program)
