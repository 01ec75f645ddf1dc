import autocannon from "autocannon"
import { Effect, Redacted, Schema } from "effect"
import { signToken } from "../src/http/AuthTokens.js"
import { benchChild } from "./childProcess.js"
import { benchJwtSecret } from "./engineStack.js"
import { type HttpServerArgs, type HttpServerMode, HttpServerReady } from "./httpProtocol.js"
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
      error === null || error === undefined
        ? resume(Effect.succeed(result))
        : resume(Effect.fail(new Error(String(error)))))
    return Effect.sync(() => instance.stop())
  })

const isReady = (message: HttpServerReady): message is HttpServerReady => message.type === "listening"

/**
 * One server child, one job read under load once per token of `tokens`. `job` is a job's id, or
 * a flashcard request the first token creates one with (engine mode).
 */
export const runStatusReads = (options: {
  readonly mode: HttpServerMode
  readonly target: BenchTarget
  readonly identityProvider?: HttpServerArgs["identityProvider"]
  readonly job: { readonly id: string } | { readonly create: unknown }
  readonly tokens: ReadonlyArray<string>
  readonly connections: number
  readonly seconds: number
}) =>
  Effect.scoped(
    Effect.gen(function*() {
      const args: HttpServerArgs = {
        mode: options.mode,
        target: options.target,
        identityProvider: options.identityProvider
      }
      const child = yield* benchChild({
        entry: "./httpServer.ts",
        args: [JSON.stringify(args)],
        message: HttpServerReady
      })
      const { port } = yield* child.next(isReady, 60)
      const jobId = "id" in options.job
        ? options.job.id
        : yield* createJob(`http://127.0.0.1:${port}`, options.tokens[0] ?? "", options.job.create)
      return yield* Effect.forEach(options.tokens, (token) =>
        readUnderLoad({ ...options, port, pid: child.pid, jobId, token }))
    })
  ).pipe(Effect.orDie)

const CreatedJob = Schema.Struct({ jobId: Schema.String })

const createJob = (baseUrl: string, token: string, body: unknown) =>
  Effect.promise(() =>
    fetch(`${baseUrl}/api/ai/flashcard-generations`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body)
    }).then((response) => response.json())
  ).pipe(Effect.flatMap(Schema.decodeUnknown(CreatedJob)), Effect.map((created) => created.jobId))

const readUnderLoad = (options: {
  readonly mode: HttpServerMode
  readonly port: number
  readonly pid: number
  readonly jobId: string
  readonly token: string
  readonly connections: number
  readonly seconds: number
}) =>
  Effect.gen(function*() {
    const request = {
      url: `http://127.0.0.1:${options.port}/api/ai/jobs/${encodeURIComponent(options.jobId)}`,
      connections: options.connections,
      headers: { authorization: `Bearer ${options.token}` }
    }
    const warmup = yield* cannon({ ...request, duration: 2 })
    if (warmup["2xx"] === 0) {
      return yield* Effect.dieMessage(`${options.mode}: no 2xx answer during warm-up (non-2xx: ${warmup.non2xx})`)
    }
    const cpuBefore = processUsage(options.pid).cpuSeconds
    const result = yield* cannon({ ...request, duration: options.seconds })
    const cpuSeconds = processUsage(options.pid).cpuSeconds - cpuBefore
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

export const runHttpBench = (options: {
  readonly target: BenchTarget
  readonly jobId: string
  readonly userId: string
  readonly connections: number
  readonly seconds: number
}) =>
  Effect.gen(function*() {
    const token = yield* signToken(
      { sub: options.userId, role: "USER", expiresInSeconds: 3600 },
      Redacted.make(benchJwtSecret)
    )
    const runOne = (mode: HttpServerMode) =>
      Effect.flatMap(runStatusReads({ ...options, mode, job: { id: options.jobId }, tokens: [token] }), ([run]) =>
        run === undefined ? Effect.dieMessage(`${mode}: no run`) : Effect.succeed(run))
    const engine = yield* runOne("engine")
    const platform = yield* runOne("platform")
    const bare = yield* runOne("bare")
    return { engine, platform, bare, connections: options.connections, seconds: options.seconds }
  })
