import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Schema } from "effect"
import { parsePrometheusText, sampleValue } from "../support/prometheusParser.js"
import { startTcpProxy } from "../support/tcpProxy.js"
import { freePort, ProcessTestError } from "./support/childProcess.js"
import {
  dispatcherStarted,
  engineEnv,
  engineStorage,
  flashcardRequest,
  httpRequest,
  pollJob,
  queryRows,
  startProgram,
  tokenFor,
  withDatabase,
  workerStarted
} from "./support/engine.js"

const graceMs = 2_000
const metricsToken = "metrics-token-for-the-direct-add-crash-test"

const JobRow = Schema.Struct({
  id: Schema.String,
  createdAt: Schema.DateFromSelf,
  startedAt: Schema.NullOr(Schema.DateFromSelf)
})
const OutboxRow = Schema.Struct({
  status: Schema.String,
  publishedAt: Schema.NullOr(Schema.DateFromSelf),
  createdAt: Schema.DateFromSelf
})

describe("issue 14: a crash between the create's commit and the creator's own queue add loses nothing", () => {
  it.live(
    "the API killed with SIGKILL after its commit, its queue add held at Redis: a dispatcher sweeps the event after the grace and the job succeeds",
    () =>
      Effect.gen(function*() {
        const storage = yield* engineStorage("direct_add_crash")
        const redis = new URL(storage.redisUrl)
        // The doomed API reaches Redis through a proxy that, once told, stops forwarding.
        const proxy = yield* startTcpProxy({ host: redis.hostname, port: Number(redis.port || 6379) })
        const proxiedRedis = new URL(storage.redisUrl)
        proxiedRedis.port = String(proxy.port)
        const dispatcherMetricsPort = yield* freePort
        const env = engineEnv(storage, {
          OUTBOX_DIRECT_GRACE_MS: String(graceMs),
          // The reaper's requeue of a queued job must not be what saves it.
          QUEUED_REDISPATCH_MS: "600000",
          METRICS_TOKEN: metricsToken
        })
        const [doomed] = yield* Effect.all(
          [
            startProgram("api", "api A", { ...env, REDIS_URL: proxiedRedis.toString() }),
            startProgram("worker", "worker", env, { ready: workerStarted }),
            startProgram("dispatcher", "dispatcher", { ...env, METRICS_PORT: String(dispatcherMetricsPort) }, {
              ready: dispatcherStarted
            })
          ],
          { concurrency: "unbounded" }
        )
        const userId = "direct-add-crash-user"
        const token = yield* tokenFor(storage, userId)

        // The queue add names the job's queue id (`aijob-…`); the readiness ping before it passes.
        yield* proxy.stopForwardingAt("aijob-")
        // The create commits, then waits on its queue add, which never reaches Redis.
        const create = yield* Effect.fork(
          httpRequest("POST", `${doomed.baseUrl}/api/ai/flashcard-generations`, { token, body: flashcardRequest(0) })
        )
        const jobId = yield* withDatabase(
          storage,
          Effect.gen(function*() {
            while (true) {
              const [row] = yield* queryRows(
                JobRow,
                "SELECT id, created_at, started_at FROM ai_job WHERE user_id = ?",
                [userId]
              )
              if (row !== undefined) return row.id
              yield* Effect.sleep(Duration.millis(10))
            }
          })
        ).pipe(
          Effect.timeoutFail({
            duration: Duration.seconds(10),
            onTimeout: () => new ProcessTestError({ message: "no job committed" })
          })
        )
        yield* doomed.signal("SIGKILL")
        expect((yield* doomed.awaitExit(Duration.seconds(5))).signal).toBe("SIGKILL")
        const answered = yield* Fiber.join(create).pipe(Effect.either)
        // The API died before it answered: the client never saw a 202.
        expect(answered._tag === "Left" || answered.right.status !== 202).toBe(true)
        const [pending] = yield* withDatabase(
          storage,
          queryRows(OutboxRow, "SELECT status, published_at, created_at FROM outbox_event WHERE aggregate_id = ?", [
            jobId
          ])
        )
        expect(pending?.status).toBe("pending")

        // A restarted API shows the job; the dispatcher's sweep, after the grace, queued it.
        const api = yield* startProgram("api", "api B", env)
        const done = yield* pollJob(api.baseUrl, token, jobId, {
          timeout: Duration.seconds(30),
          every: Duration.millis(200)
        })
        expect(done.lifecycleStatus).toBe("succeeded")
        const rows = yield* withDatabase(
          storage,
          Effect.all([
            queryRows(JobRow, "SELECT id, created_at, started_at FROM ai_job WHERE user_id = ?", [userId]),
            // The job's enqueue event (its terminal event is the notify lane's).
            queryRows(
              OutboxRow,
              "SELECT status, published_at, created_at FROM outbox_event WHERE aggregate_id = ? AND lane = 'enqueue'",
              [jobId]
            )
          ])
        )
        expect(rows[0]).toHaveLength(1)
        // No worker saw the job before the sweep: the creator's add never reached the queue.
        expect(rows[0][0]!.startedAt!.getTime() - rows[0][0]!.createdAt.getTime()).toBeGreaterThanOrEqual(graceMs)
        expect(rows[1].map((event) => event.status)).toEqual(["published"])
        const published = rows[1][0]!
        expect(published.publishedAt!.getTime() - published.createdAt.getTime()).toBeGreaterThanOrEqual(graceMs)
        const metrics = yield* httpRequest("GET", `http://127.0.0.1:${dispatcherMetricsPort}/metrics`, {
          token: metricsToken
        })
        expect(sampleValue(parsePrometheusText(metrics.text), "ai_outbox_dispatch_latency_seconds_count")).toBe(1)
      }).pipe(Effect.scoped),
    { timeout: 120_000 }
  )
})
