/**
 * Child process of the HTTP part: one server on 127.0.0.1 (a free port), alone in its process.
 * - `engine`: the engine's real API (`apiServer`: HttpApi, bearer JWT auth, error mapping) over
 *   the production layers, so `GET /api/ai/jobs/:jobId` verifies the token, reads the job (and,
 *   for a succeeded job, its artifacts) and encodes the response Schema.
 * - `platform`: the framework's floor: a one-endpoint `HttpApi` on the same Node server, its
 *   handler the bare one's SELECTs (same pool, same conversion), its answer `JSON.stringify`-ed;
 *   no auth, no middleware, no Schema beyond the path parameter. What `HttpApi` alone costs.
 * - `bare`: `node:http` with a mysql2 pool of the same size (10) running the same SELECTs
 *   (the job row; the artifacts of a succeeded job), its VARBINARY identifiers read as text the
 *   way the engine's client reads them, and `JSON.stringify`; no auth, no Schema.
 *   Its `/api/ai/jobs/:jobId/events` sends one status frame and holds the connection open: the
 *   SSE bench's memory baseline.
 *
 * On `measure` it answers with its memory (the SSE bench's per-stream figure).
 *
 * argv[2]: JSON `{ mode, target }`.
 */
import {
  HttpApi,
  HttpApiBuilder,
  HttpApiEndpoint,
  HttpApiGroup,
  HttpServer,
  HttpServerResponse
} from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Context, Effect, Layer, Logger, LogLevel, Queue, Schema } from "effect"
import type mysql from "mysql2/promise"
import { createServer } from "node:http"
import { ApiSettings } from "../src/config/ApiSettings.js"
import { AuthSettings } from "../src/config/AuthSettings.js"
import { apiServer } from "../src/http/server.js"
import { binaryStringsAsText } from "../src/layers/mysql/mysqlClient.js"
import { ReadinessProbeLive } from "../src/main/AppLayers.js"
import { parentMessages, toParent } from "./childProcess.js"
import { benchEngineLayer, benchJwtSecret } from "./engineStack.js"
import { HttpServerArgs, HttpServerCommand } from "./httpProtocol.js"
import { type BenchTarget, rawPool } from "./infra.js"
import type { MemoryReading } from "./memoryProtocol.js"

const engineServer = (target: BenchTarget, options: Pick<HttpServerArgs, "identityProvider" | "liveStreams">) =>
  Effect.gen(function*() {
    const { identityProvider } = options
    const auth = AuthSettings.make({
      jwtSecret: benchJwtSecret,
      identityProvider: identityProvider === undefined
        ? undefined
        : { issuer: identityProvider.issuer, audiences: [identityProvider.audience] }
    })
    const server = apiServer().pipe(
      Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
      Layer.provide(Layer.mergeAll(ApiSettings.make({ liveStreams: options.liveStreams }), auth, ReadinessProbeLive)),
      Layer.provide(benchEngineLayer(target, { workerConcurrency: 1 }))
    )
    const context = yield* Layer.build(server)
    const address = Context.get(context, HttpServer.HttpServer).address
    return address._tag === "TcpAddress" ? address.port : yield* Effect.dieMessage("expected a TCP address")
  })

/** The job and, when it succeeded, its artifacts: the bare handler's two SELECTs, identifiers as text. */
const readJob = async (pool: mysql.Pool, jobId: string): Promise<string | undefined> => {
  const [jobs] = await pool.execute("SELECT * FROM ai_job WHERE id = ?", [jobId])
  binaryStringsAsText(jobs)
  const job: unknown = Array.isArray(jobs) ? jobs[0] : undefined
  if (job === undefined) return undefined
  const succeeded = typeof job === "object" && job !== null && "lifecycle_status" in job &&
    job.lifecycle_status === "succeeded"
  const [artifacts] = succeeded
    ? await pool.execute(
      "SELECT * FROM ai_job_artifact WHERE job_id = ? ORDER BY ordinal, artifact_type, artifact_id",
      [jobId]
    )
    : [[]]
  binaryStringsAsText(artifacts)
  return JSON.stringify({ job, artifacts })
}

class FloorApi extends HttpApi.make("floor").add(
  HttpApiGroup.make("jobs").add(
    HttpApiEndpoint.get("getJob", "/api/ai/jobs/:jobId").setPath(Schema.Struct({ jobId: Schema.String }))
  )
) {}

const platformServer = (target: BenchTarget) =>
  Effect.gen(function*() {
    const pool = yield* rawPool(target.databaseUrl, 10)
    const handlers = HttpApiBuilder.group(FloorApi, "jobs", (group) =>
      group.handleRaw("getJob", ({ path }) =>
        Effect.map(
          Effect.promise(() => readJob(pool, path.jobId)),
          (body) =>
            body === undefined
              ? HttpServerResponse.text("{\"code\":\"JOB_NOT_FOUND\"}", {
                status: 404,
                contentType: "application/json"
              })
              : HttpServerResponse.text(body, { contentType: "application/json" })
        )))
    const server = HttpApiBuilder.serve().pipe(
      Layer.provide(HttpApiBuilder.api(FloorApi).pipe(Layer.provide(handlers))),
      Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
    )
    const context = yield* Layer.build(server)
    const address = Context.get(context, HttpServer.HttpServer).address
    return address._tag === "TcpAddress" ? address.port : yield* Effect.dieMessage("expected a TCP address")
  })

const jobPath = /^\/api\/ai\/jobs\/([^/?]+)$/
const eventsPath = /^\/api\/ai\/jobs\/([^/?]+)\/events$/

const bareServer = (target: BenchTarget) =>
  Effect.gen(function*() {
    const pool = yield* rawPool(target.databaseUrl, 10)
    const server = createServer((request, response) => {
      // The SSE bench's baseline: one status frame from the row, then the connection held open.
      const events = eventsPath.exec(request.url ?? "")
      if (request.method === "GET" && events !== null) {
        void pool.execute("SELECT lifecycle_status, progress FROM ai_job WHERE id = ?", [
          decodeURIComponent(events[1] ?? "")
        ])
          .then(([rows]) => {
            response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
            response.write(`event: status\ndata: ${JSON.stringify(Array.isArray(rows) ? rows[0] ?? null : null)}\n\n`)
          })
          .catch(() => response.writeHead(500).end())
        return
      }
      const match = jobPath.exec(request.url ?? "")
      if (request.method !== "GET" || match === null) {
        response.writeHead(404).end()
        return
      }
      readJob(pool, decodeURIComponent(match[1] ?? "")).then((body) => {
        if (body === undefined) {
          response.writeHead(404, { "content-type": "application/json" }).end("{\"code\":\"JOB_NOT_FOUND\"}")
        } else response.writeHead(200, { "content-type": "application/json" }).end(body)
      }).catch(() => {
        response.writeHead(500).end()
      })
    })
    yield* Effect.acquireRelease(
      Effect.async<void>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.void))
      }),
      () => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
    )
    const address = server.address()
    return typeof address === "object" && address !== null ? address.port : yield* Effect.dieMessage("no port")
  })

/** The process's memory after two full GCs (when started with `--expose-gc`). */
const memoryReading = (label: string) =>
  Effect.gen(function*() {
    yield* Effect.sleep("50 millis")
    globalThis.gc?.()
    globalThis.gc?.()
    const usage = process.memoryUsage()
    return {
      type: "memory",
      label,
      rssBytes: usage.rss,
      heapUsedBytes: usage.heapUsed,
      heapTotalBytes: usage.heapTotal,
      externalBytes: usage.external,
      gcExposed: globalThis.gc !== undefined
    } satisfies MemoryReading
  })

const program = Effect.gen(function*() {
  const args = yield* Schema.decodeUnknown(Schema.parseJson(HttpServerArgs))(process.argv[2] ?? "")
  const inbox = yield* parentMessages(HttpServerCommand)
  const port = args.mode === "engine"
    ? yield* engineServer(args.target, args)
    : args.mode === "platform"
    ? yield* platformServer(args.target)
    : yield* bareServer(args.target)
  yield* toParent({ type: "listening", port })
  while (true) {
    const command = yield* Queue.take(inbox)
    if (command.type === "stop") return
    yield* toParent(yield* memoryReading(command.label))
  }
}).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning))

NodeRuntime.runMain(program)
