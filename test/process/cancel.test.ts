import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { JobStatusResponse } from "../../src/http/ApiSchemas.js"
import {
  artifactCounts,
  createJob,
  decodeBody,
  dispatcherStarted,
  engineEnv,
  engineStorage,
  executeSettleMs,
  flashcardRequest,
  httpRequest,
  inExecute,
  leaseOf,
  pollJob,
  startProgram,
  tokenFor,
  workerStarted
} from "./support/engine.js"

describe("issue 4: cancel across processes", () => {
  it.live(
    "cancel through the API stops the job in another process's worker within about a second (Redis job:cancel)",
    () =>
      Effect.gen(function*() {
        const storage = yield* engineStorage("cancel")
        // Heartbeats every 20 s: only the Redis message can stop the job within a few seconds.
        const env = engineEnv(storage, { JOB_HEARTBEAT_MS: "20000", JOB_LOCK_TTL_MS: "60000" })
        const [api] = yield* Effect.all(
          [
            startProgram("api", "api", env),
            startProgram("dispatcher", "dispatcher", env, { ready: dispatcherStarted }),
            startProgram("worker", "worker", { ...env, SYNTHETIC_LATENCY_MS: "30000" }, { ready: workerStarted })
          ],
          { concurrency: "unbounded" }
        )
        const token = yield* tokenFor(storage, "cancel-user")
        const job = yield* createJob(api.baseUrl, token, "flashcard-generations", flashcardRequest(1))
        yield* pollJob(api.baseUrl, token, job.jobId, {
          until: inExecute,
          timeout: Duration.seconds(20)
        })
        yield* Effect.sleep(Duration.millis(executeSettleMs))

        const requestedAt = Date.now()
        const answer = yield* httpRequest("POST", `${api.baseUrl}/api/ai/jobs/${job.jobId}/cancel`, { token })
        expect(answer.status).toBe(200)
        expect((yield* decodeBody(JobStatusResponse)(answer)).lifecycleStatus).toBe("running")
        const cancelled = yield* pollJob(api.baseUrl, token, job.jobId, {
          timeout: Duration.seconds(10),
          every: Duration.millis(50)
        })
        const latencyMs = Date.now() - requestedAt
        expect(cancelled.lifecycleStatus).toBe("cancelled")
        expect(latencyMs).toBeLessThan(3_000)

        const row = yield* leaseOf(storage, job.jobId)
        expect(row.lifecycleStatus).toBe("cancelled")
        expect(row.lockUntil).toBeNull()
        expect(yield* artifactCounts(storage)).toEqual([])
        console.log(`cancel of a running job: cancelled ${latencyMs} ms after the request`)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
