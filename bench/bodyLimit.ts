/**
 * `npm run bench:body-limit`: the API under oversized bodies. Starts the embedded engine
 * (`src/main/all-in-one.ts`, in memory, its own process), reads its idle resident memory, then
 * has 16 clients send 100 MB bodies (chunked and with a Content-Length, one after another, for
 * `BENCH_BODY_SECONDS`, after a 2 s warm-up) while one client polls `/healthz`. Prints the peak / idle RSS ratio
 * (target < 2) and the `/healthz` p99 (target < 100 ms), with the same probe on the idle API and
 * the API's own event-loop delay beside it (a busy machine delays /healthz too). Needs no
 * database or Redis.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Config, Effect, Redacted, Schema } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { readFile } from "node:fs/promises"
import { Agent, request as httpRequest } from "node:http"
import { createServer } from "node:net"
import { availableParallelism, loadavg } from "node:os"
import { fileURLToPath } from "node:url"
import { signToken } from "../src/http/AuthTokens.js"
import { round, summarize } from "./stats.js"

const secret = "bench-body-limit-secret-0123456789abcdefgh"
const megabyte = 1_000_000

const settings = Config.all({
  clients: Config.integer("BENCH_BODY_CLIENTS").pipe(Config.withDefault(16)),
  bodyBytes: Config.integer("BENCH_BODY_BYTES").pipe(Config.withDefault(100 * megabyte)),
  seconds: Config.integer("BENCH_BODY_SECONDS").pipe(Config.withDefault(10))
})

const freePort = Effect.async<number>((resume) => {
  const probe = createServer()
  probe.listen(0, "127.0.0.1", () => {
    const address = probe.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    probe.close(() => resume(Effect.succeed(port)))
  })
})

/** Resident memory of `pid` in bytes, from /proc (Linux). */
const residentBytes = (pid: number) =>
  Effect.promise(async () => {
    const status = await readFile(`/proc/${pid}/status`, "utf8")
    const kilobytes = /VmRSS:\s+(\d+)\s+kB/.exec(status)?.[1]
    return Number(kilobytes ?? "0") * 1024
  })

/** The embedded engine: no storage variables, our secret, quiet logs. */
const embeddedEnv = (port: number) => {
  const { DATABASE_URL: _database, REDIS_URL: _redis, ...rest } = process.env
  return { ...rest, PORT: String(port), AUTH_JWT_SECRET: secret, LOG_LEVEL: "Error" }
}

const startApi = (port: number) =>
  Effect.acquireRelease(
    Effect.sync(() =>
      spawn(
        process.execPath,
        [
          "--import",
          "tsx",
          "--import",
          fileURLToPath(new URL("./eventLoopDelay.ts", import.meta.url)),
          fileURLToPath(new URL("../src/main/all-in-one.ts", import.meta.url))
        ],
        { env: embeddedEnv(port), stdio: ["ignore", "ignore", "pipe"] }
      )
    ),
    (child: ChildProcess) =>
      Effect.async<void>((resume) => {
        if (child.exitCode !== null) return resume(Effect.void)
        child.once("exit", () => resume(Effect.void))
        child.kill("SIGTERM")
      })
  )

const EventLoopDelay = Schema.parseJson(
  Schema.Struct({ p50Ms: Schema.Number, p99Ms: Schema.Number, maxMs: Schema.Number })
)

/** Asks the API process for its event-loop delay since the last ask (see `eventLoopDelay.ts`). */
const eventLoopDelayOf = (child: ChildProcess) =>
  Effect.async<string>((resume) => {
    const stderr = child.stderr
    if (stderr === null) return resume(Effect.succeed("{}"))
    let buffered = ""
    const onData = (part: Buffer) => {
      buffered += part.toString("utf8")
      const line = /event-loop-delay (\{.*\})\n/.exec(buffered)
      if (line !== null) {
        stderr.off("data", onData)
        resume(Effect.succeed(line[1] ?? "{}"))
      }
    }
    stderr.on("data", onData)
    child.kill("SIGUSR2")
    return Effect.sync(() => stderr.off("data", onData))
  }).pipe(Effect.flatMap(Schema.decodeUnknown(EventLoopDelay)))

const agent = new Agent({ keepAlive: true, maxSockets: 1 })

/** One GET /healthz; its latency in ms, or -1 when it did not answer 200. */
const healthz = (port: number) =>
  Effect.async<number>((resume) => {
    const began = performance.now()
    const client = httpRequest({ host: "127.0.0.1", port, path: "/healthz", agent }, (response) => {
      response.resume()
      response.on("end", () => resume(Effect.succeed(response.statusCode === 200 ? performance.now() - began : -1)))
    })
    client.on("error", () => resume(Effect.succeed(-1)))
    client.end()
  })

const waitUntilUp = (port: number) =>
  Effect.gen(function*() {
    for (let attempt = 0; attempt < 300; attempt++) {
      if ((yield* healthz(port)) >= 0) return
      yield* Effect.sleep("100 millis")
    }
    return yield* Effect.dieMessage("the API did not come up within 30 s")
  })

const ClientsReport = Schema.parseJson(
  Schema.Struct({ answers: Schema.Record({ key: Schema.String, value: Schema.Number }), written: Schema.Number })
)

/** Runs the senders in their own process; their report once they are done. */
const runClients = (
  args: {
    readonly port: number
    readonly token: string
    readonly clients: number
    readonly bytes: number
    readonly seconds: number
  }
) =>
  Effect.async<string>((resume) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", fileURLToPath(new URL("./bodyLimitClients.ts", import.meta.url)), JSON.stringify(args)],
      { stdio: ["ignore", "pipe", "inherit"] }
    )
    let output = ""
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (part: string) => {
      output += part
    })
    child.on("exit", () => resume(Effect.succeed(output.trim())))
    return Effect.sync(() => child.kill("SIGKILL"))
  }).pipe(Effect.flatMap(Schema.decodeUnknown(ClientsReport)))

/** Polls /healthz every 10 ms while `busy` runs; the latencies and the failures. */
const probeWhile = <A, E>(port: number, busy: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const latencies: Array<number> = []
    let failures = 0
    const probe = Effect.gen(function*() {
      while (true) {
        const latency = yield* healthz(port)
        if (latency < 0) failures++
        else latencies.push(latency)
        yield* Effect.sleep("10 millis")
      }
    })
    const result = yield* Effect.raceFirst(busy, Effect.zipRight(probe, Effect.never))
    return { result, health: summarize(latencies), failures }
  })

/** The highest RSS of `pid` seen while `busy` runs (sampled every 50 ms). */
const peakWhile = <A, E>(pid: number, busy: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    let peak = 0
    const sample = Effect.gen(function*() {
      while (true) {
        peak = Math.max(peak, yield* residentBytes(pid))
        yield* Effect.sleep("50 millis")
      }
    })
    const result = yield* Effect.raceFirst(busy, Effect.zipRight(sample, Effect.never))
    return { result, peak: Math.max(peak, yield* residentBytes(pid)) }
  })

const program = Effect.gen(function*() {
  const { clients, bodyBytes, seconds } = yield* settings
  const port = yield* freePort
  const child = yield* startApi(port)
  const pid = child.pid ?? 0
  yield* waitUntilUp(port)
  yield* Effect.sleep("2 seconds")

  // Idle: the same probe with no load, the machine's own noise.
  yield* eventLoopDelayOf(child)
  const idle = yield* peakWhile(pid, probeWhile(port, Effect.sleep(`${Math.min(5, seconds)} seconds`)))
  const idleLoop = yield* eventLoopDelayOf(child)
  const idleRss = idle.peak

  const token = yield* signToken(
    { sub: "bench-body-limit", role: "USER", expiresInSeconds: 3600 },
    Redacted.make(secret)
  )
  // Warm-up (not measured): the first refusals compile their code paths.
  yield* runClients({ port, token, clients, bytes: bodyBytes, seconds: 2 })
  yield* eventLoopDelayOf(child)
  const loaded = yield* peakWhile(
    pid,
    probeWhile(port, runClients({ port, token, clients, bytes: bodyBytes, seconds }))
  )
  const loadedLoop = yield* eventLoopDelayOf(child)
  const { answers, written } = loaded.result.result
  const health = loaded.result.health

  const mb = (bytes: number) => round(bytes / 1_048_576, 1)
  const rssRatio = round(loaded.peak / idleRss, 2)
  const healthOk = health.p99Ms < 100 && loaded.result.failures === 0
  const lines = [
    `body-limit: ${clients} clients sending ${
      round(bodyBytes / megabyte, 0)
    } MB bodies (chunked and Content-Length, alternating) for ${seconds} s, against the embedded engine (HTTP_MAX_BODY_BYTES default)`,
    `  answers: ${Object.entries(answers).map(([kind, n]) => `${kind} ×${n}`).join(", ")}; ${
      mb(written)
    } MiB written by the clients in all`,
    `  RSS idle ${mb(idleRss)} MiB, peak under load ${mb(loaded.peak)} MiB: peak/idle ${rssRatio} (target < 2) ${
      rssRatio < 2 ? "PASS" : "FAIL"
    }`,
    `  /healthz idle:  ${idle.result.health.count} answers, p50 ${idle.result.health.p50Ms} ms, p99 ${idle.result.health.p99Ms} ms`,
    `  /healthz load:  ${health.count} answers, ${loaded.result.failures} failed, p50 ${health.p50Ms} ms, p99 ${health.p99Ms} ms, max ${health.maxMs} ms (target p99 < 100 ms) ${
      healthOk ? "PASS" : "FAIL"
    }`,
    `  API event-loop delay: idle p99 ${idleLoop.p99Ms} ms (max ${idleLoop.maxMs}), under load p99 ${loadedLoop.p99Ms} ms (max ${loadedLoop.maxMs})`,
    `  load average (1 min) at the end: ${round(loadavg()[0] ?? 0, 2)} on ${availableParallelism()} cores`
  ]
  yield* Effect.sync(() => process.stdout.write(lines.join("\n") + "\n"))
}).pipe(Effect.scoped)

NodeRuntime.runMain(program)
