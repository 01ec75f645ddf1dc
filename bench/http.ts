import autocannon from "autocannon"
import { Effect, Redacted } from "effect"
import { signToken } from "../src/http/AuthTokens.js"
import { benchChild } from "./childProcess.js"
import { benchJwtSecret } from "./engineStack.js"
import { type HttpServerMode, HttpServerReady } from "./httpProtocol.js"
import type { BenchTarget } from "./infra.js"
import { processUsage } from "./procStat.js"
import { round } from "./stats.js"

/**
 * `GET /api/ai/jobs/:jobId` under autocannon (programmatic API, 127.0.0.1), the engine's API
 * against a bare node:http handler doing the same SELECTs. Each server runs alone in its own
 * child process; the load generator runs in this one. Same job, same connections, same duration,
 * each after a short warm-up.
 */
export interface HttpRun {
  readonly mode: HttpServerMode
  readonly requestsPerSecond: number
  readonly latencyP50Ms: number
  readonly latencyP99Ms: number
  readonly requests: number
  /** The server process's CPU (user + system, from /proc) per answered request: its own cost, apart from the load generator's. */
  readonly cpuMsPerRequest: number
  readonly non2xx: number
  readonly errors: number
}

const cannon = (options: autocannon.Options) =>
  Effect.async<autocannon.Result, Error>((resume) => {
    const instance = autocannon(options, (error, result) =>
      error === null || error === undefined ? resume(Effect.succeed(result)) : resume(Effect.fail(new Error(String(error)))))
    return Effect.sync(() => instance.stop())
  })

const isReady = (message: HttpServerReady): message is HttpServerReady => message.type === "listening"

const runOne = (options: {
  readonly mode: HttpServerMode
  readonly target: BenchTarget
  readonly jobId: string
  readonly token: string
  readonly connections: number
  readonly seconds: number
}) =>
  Effect.scoped(
    Effect.gen(function* () {
      const child = yield* benchChild({
        entry: "./httpServer.ts",
        args: [JSON.stringify({ mode: options.mode, target: options.target })],
        message: HttpServerReady
      })
      const { port } = yield* child.next(isReady, 60)
      const request = {
        url: `http://127.0.0.1:${port}/api/ai/jobs/${encodeURIComponent(options.jobId)}`,
        connections: options.connections,
        headers: { authorization: `Bearer ${options.token}` }
      }
      const warmup = yield* cannon({ ...request, duration: 2 })
      if (warmup["2xx"] === 0) return yield* Effect.dieMessage(`${options.mode}: no 2xx answer during warm-up (non-2xx: ${warmup.non2xx})`)
      const cpuBefore = processUsage(child.pid).cpuSeconds
      const result = yield* cannon({ ...request, duration: options.seconds })
      const cpuSeconds = processUsage(child.pid).cpuSeconds - cpuBefore
      return {
        mode: options.mode,
        requestsPerSecond: round(result.requests.average, 0),
        latencyP50Ms: result.latency.p50,
        latencyP99Ms: result.latency.p99,
        requests: result.requests.total,
        cpuMsPerRequest: round((cpuSeconds * 1000) / Math.max(1, result.requests.total), 3),
        non2xx: result.non2xx,
        errors: result.errors
      } satisfies HttpRun
    })
  ).pipe(Effect.orDie)

export const runHttpBench = (options: {
  readonly target: BenchTarget
  readonly jobId: string
  readonly userId: string
  readonly connections: number
  readonly seconds: number
}) =>
  Effect.gen(function* () {
    const token = yield* signToken({ sub: options.userId, role: "USER", expiresInSeconds: 3600 }, Redacted.make(benchJwtSecret))
    const engine = yield* runOne({ ...options, token, mode: "engine" })
    const platform = yield* runOne({ ...options, token, mode: "platform" })
    const bare = yield* runOne({ ...options, token, mode: "bare" })
    return { engine, platform, bare, connections: options.connections, seconds: options.seconds }
  })
