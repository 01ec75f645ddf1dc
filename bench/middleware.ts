/**
 * `npm run bench:middleware`: what each of the API's per-request middlewares costs, in this
 * process, against a bare handler. Each one wraps a handler that answers at once, the request is a
 * Node `IncomingMessage` made here (no socket) handed to the platform's own Node handler, and the
 * figure is CPU µs per request (user + system) above the bare handler's run beside it (each
 * measured four times a round, after a collection), the median of `BENCH_MIDDLEWARE_ROUNDS`
 * rounds of `BENCH_MIDDLEWARE_REQUESTS` requests each. Two kinds of
 * request, as the typed client sends them (a bearer token and a `traceparent`): a status read
 * (GET, no body) and a create (POST, a small JSON body the handler reads).
 *
 * `BENCH_MIDDLEWARE_BASELINE=<git ref>` (`main`, say) measures that commit's middlewares too, in
 * the same run, their rounds taken in turn with this tree's, and prints the ratio new / old.
 * Figures, not a test.
 */
import { type HttpApp, HttpMiddleware, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Config, Effect, Layer, Logger, LogLevel, Redacted, Runtime, Schema } from "effect"
import { execFileSync } from "node:child_process"
import { mkdtempSync, symlinkSync } from "node:fs"
import { IncomingMessage, type ServerResponse } from "node:http"
import { Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { ApiSettings } from "../src/config/ApiSettings.js"
import { AuthSettings } from "../src/config/AuthSettings.js"
import { signToken } from "../src/http/AuthTokens.js"
import type * as HttpMetricsModule from "../src/http/httpMetrics.js"
import type * as RequestBodyModule from "../src/http/requestBody.js"
import type * as RequestSpanModule from "../src/http/requestSpan.js"
import type * as ResponseHeadersModule from "../src/http/responseHeaders.js"
import { TokenVerifier } from "../src/http/TokenVerifier.js"
import { cpuMicros } from "./procStat.js"
import { median, round } from "./stats.js"

const step = (label: string) => Effect.sync(() => process.stderr.write(`bench:middleware: ${label}\n`))

const settings = Config.all({
  baseline: Config.string("BENCH_MIDDLEWARE_BASELINE").pipe(Config.withDefault("")),
  requests: Config.integer("BENCH_MIDDLEWARE_REQUESTS").pipe(Config.withDefault(5_000)),
  rounds: Config.integer("BENCH_MIDDLEWARE_ROUNDS").pipe(Config.withDefault(5))
})

const repositoryRoot = fileURLToPath(new URL("..", import.meta.url))
const jwtSecret = "bench-middleware-secret-0123456789abcdefghij"
const maxBodyBytes = 1_048_576

/** The middlewares of one tree (this one, or a baseline commit's). */
interface Middlewares {
  readonly requestSpan: typeof RequestSpanModule.requestSpan
  readonly httpMetrics: typeof HttpMetricsModule.httpMetrics
  readonly securityHeaders: typeof ResponseHeadersModule.securityHeaders
  readonly lingerWhenBodyUnread: typeof RequestBodyModule.lingerWhenBodyUnread
  readonly requestBodyGuard: typeof RequestBodyModule.requestBodyGuard
}

const loadMiddlewares = (root: string) =>
  Effect.promise(async (): Promise<Middlewares> => {
    const load = (file: string): Promise<unknown> => import(pathToFileURL(join(root, "src/http", file)).href)
    const [span, metrics, headers, body] = await Promise.all([
      load("requestSpan.ts") as Promise<typeof RequestSpanModule>,
      load("httpMetrics.ts") as Promise<typeof HttpMetricsModule>,
      load("responseHeaders.ts") as Promise<typeof ResponseHeadersModule>,
      load("requestBody.ts") as Promise<typeof RequestBodyModule>
    ])
    return {
      requestSpan: span.requestSpan,
      httpMetrics: metrics.httpMetrics,
      securityHeaders: headers.securityHeaders,
      lingerWhenBodyUnread: body.lingerWhenBodyUnread,
      requestBodyGuard: body.requestBodyGuard
    }
  })

/** The `src` of `ref` in a scratch directory beside this tree's packages (the same `effect` instance). */
const checkout = (ref: string) =>
  Effect.sync(() => {
    const directory = mkdtempSync(join(tmpdir(), "bench-middleware-"))
    execFileSync("sh", ["-c", `git archive ${JSON.stringify(ref)} src | tar -x -C ${JSON.stringify(directory)}`], {
      cwd: repositoryRoot
    })
    symlinkSync(join(repositoryRoot, "node_modules"), join(directory, "node_modules"))
    return directory
  })

type Kind = "read" | "create"

const answer = HttpServerResponse.unsafeJson({ ok: true })

/** The bare handler: answers at once (a create reads its body first, as every create does). */
const handlerFor = (kind: Kind): HttpApp.Default<never, HttpServerRequest.HttpServerRequest> =>
  kind === "read" ? Effect.succeed(answer) : Effect.as(Effect.orDie(readCreateBody), answer)

const CreateBody = Schema.Struct({ sourceText: Schema.String, count: Schema.Number })
const readCreateBody = HttpServerRequest.schemaBodyJson(CreateBody)
const createBody = Buffer.from(JSON.stringify({ sourceText: "Photosynthesis turns light into sugar.", count: 2 }))

const socket = new Socket()
Object.defineProperty(socket, "remoteAddress", { value: "127.0.0.1" })

/** A request as Node's parser hands it over: headers as sent, the body already in the stream. */
const nodeRequest = (kind: Kind, headers: Readonly<Record<string, string>>): IncomingMessage => {
  const message = new IncomingMessage(socket)
  message.httpVersion = "1.1"
  message.method = kind === "read" ? "GET" : "POST"
  message.url = kind === "read" ? "/api/ai/jobs/job_01JBENCHMIDDLEWARE0000000000" : "/api/ai/flashcard-generations"
  message.headers = kind === "read"
    ? { ...headers }
    : { ...headers, "content-type": "application/json", "content-length": String(createBody.length) }
  if (kind === "create") message.push(createBody)
  message.push(null)
  message.once("end", () => {
    message.complete = true
  })
  return message
}

/**
 * The least of a Node response the platform's handler uses: `end` calls back at once, as if the
 * answer were flushed, and then `done`.
 */
const nodeResponse = (done: () => void): ServerResponse => {
  const response = {
    writableEnded: false,
    writeHead: () => response,
    end: (_body?: unknown, flushed?: () => void) => {
      response.writableEnded = true
      queueMicrotask(() => {
        flushed?.()
        done()
      })
      return response
    },
    on: () => response
  }
  return response as unknown as ServerResponse
}

const program = Effect.gen(function*() {
  const s = yield* settings
  const token = yield* signToken(
    { sub: "bench-middleware-user", role: "USER", expiresInSeconds: 3600 },
    Redacted.make(jwtSecret)
  )
  const headers = {
    host: "127.0.0.1:3000",
    authorization: `Bearer ${token}`,
    "user-agent": "@effect/platform FetchHttpClient",
    accept: "application/json",
    "accept-encoding": "gzip, deflate",
    connection: "keep-alive",
    traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    b3: "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1"
  }
  // As the API's server: no platform span (`requestSpan` makes the request's span).
  const runtime = yield* Effect.locally(
    Effect.runtime<ApiSettings | TokenVerifier>(),
    HttpMiddleware.currentTracerDisabledWhen,
    () => true
  )

  const trees: Array<readonly [string, Middlewares]> = []
  if (s.baseline !== "") {
    yield* step(`loading the middlewares of ${s.baseline}`)
    trees.push([s.baseline, yield* loadMiddlewares(yield* checkout(s.baseline))])
  }
  trees.push(["this tree", yield* loadMiddlewares(repositoryRoot)])

  type Outer = (
    app: HttpApp.Default<unknown, HttpServerRequest.HttpServerRequest>
  ) => HttpApp.Default<unknown, ApiSettings | TokenVerifier | HttpServerRequest.HttpServerRequest>
  /** Around the handled app, as the server's middleware (`outer`), or around the handler, as an API middleware (`inner`). */
  interface Variant {
    readonly outer?: Outer
    readonly inner?: (
      app: HttpApp.Default<never, HttpServerRequest.HttpServerRequest>
    ) => HttpApp.Default<unknown, HttpServerRequest.HttpServerRequest>
  }
  const variants = (m: Middlewares): ReadonlyArray<readonly [string, Variant]> => [
    ["requestSpan", { outer: (app) => m.requestSpan(app) }],
    ["httpMetrics", { outer: (app) => m.httpMetrics(app) }],
    ["securityHeaders", { outer: (app) => m.securityHeaders(app) }],
    ["lingerWhenBodyUnread", { outer: (app) => m.lingerWhenBodyUnread(app) }],
    ["requestBodyGuard", { inner: (app) => m.requestBodyGuard(maxBodyBytes)(app) }],
    ["all of them", {
      outer: (app) => m.requestSpan(m.httpMetrics(m.securityHeaders(m.lingerWhenBodyUnread(app)))),
      inner: (app) => m.requestBodyGuard(maxBodyBytes)(app)
    }]
  ]

  /** Runs `requests` requests of `kind` one after another: CPU µs per request. */
  const timeRequests = (variant: Variant, kind: Kind, requests: number) =>
    Effect.promise(async () => {
      const app = variant.inner === undefined ? handlerFor(kind) : variant.inner(handlerFor(kind))
      const outer: Outer = variant.outer ?? ((app) => app)
      const handler = Runtime.runSync(runtime)(NodeHttpServer.makeHandler(app, outer))
      // A clean heap for each run (the script runs node with --expose-gc), so no run collects another's garbage.
      if (typeof globalThis.gc === "function") globalThis.gc()
      const started = cpuMicros()
      for (let i = 0; i < requests; i++) {
        await new Promise<void>((resolve) => handler(nodeRequest(kind, headers), nodeResponse(resolve)))
      }
      return (cpuMicros() - started) / requests
    })
  const bare: Variant = {}

  const kinds: ReadonlyArray<Kind> = ["read", "create"]
  const names = variants(trees[0]![1]).map(([name]) => name)
  const figures = new Map<string, Array<number>>()
  const record = (key: string, value: number) => figures.set(key, [...(figures.get(key) ?? []), value])

  yield* step("warm-up (not counted)")
  for (const kind of kinds) {
    yield* timeRequests(bare, kind, s.requests)
    for (const [, tree] of trees) {
      for (const [, variant] of variants(tree)) yield* timeRequests(variant, kind, s.requests)
    }
  }
  for (let pass = 1; pass <= s.rounds; pass++) {
    yield* step(`round ${pass} of ${s.rounds}`)
    for (const kind of kinds) {
      for (const [index, name] of names.entries()) {
        // The bare handler and each tree's version in turn, four times: on a shared machine the
        // load drifts, and a middleware's cost is its difference from the bare run beside it.
        const runs = new Map<string, Array<number>>()
        for (let repeat = 0; repeat < 4; repeat++) {
          runs.set("bare", [...(runs.get("bare") ?? []), yield* timeRequests(bare, kind, s.requests)])
          // Each tree first in turn: the one run second pays for the garbage of the one before.
          for (const [treeName, tree] of repeat % 2 === 0 ? trees : [...trees].reverse()) {
            const variant = variants(tree)[index]![1]
            runs.set(treeName, [...(runs.get(treeName) ?? []), yield* timeRequests(variant, kind, s.requests)])
          }
        }
        const bareMicros = median(runs.get("bare") ?? [])
        record(`${kind}|bare`, bareMicros)
        for (const [treeName] of trees) {
          record(`${kind}|${treeName}|${name}`, median(runs.get(treeName) ?? []) - bareMicros)
        }
      }
    }
  }

  const lines = kinds.flatMap((kind) => [
    `${
      kind === "read" ? "status read (GET, no body)" : "create (POST, JSON body)"
    }: CPU µs per request above the bare handler (bare: ${round(median(figures.get(`${kind}|bare`) ?? []), 2)} µs)`,
    ...names.map((name) => {
      const cells = trees.map(([treeName]) => {
        const runs = figures.get(`${kind}|${treeName}|${name}`) ?? []
        return `${treeName} ${round(median(runs), 2)}`
      })
      const ratio = trees.length === 2
        ? (() => {
          const old = figures.get(`${kind}|${trees[0]![0]}|${name}`) ?? []
          const next = figures.get(`${kind}|${trees[1]![0]}|${name}`) ?? []
          return `; new / old ${round(median(next) / median(old), 3)}`
        })()
        : ""
      return `  ${name.padEnd(22)} ${cells.join(", ")}${ratio}`
    })
  ])
  yield* Effect.sync(() => process.stdout.write(lines.join("\n") + "\n"))
}).pipe(
  Effect.provide(Layer.provideMerge(
    TokenVerifier.Default,
    Layer.merge(ApiSettings.make(), AuthSettings.make({ jwtSecret }))
  )),
  Logger.withMinimumLogLevel(LogLevel.Warning)
)

NodeRuntime.runMain(program)
