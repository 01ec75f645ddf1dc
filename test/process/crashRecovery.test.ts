import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import {
  artifactCounts,
  awaitLease,
  createJob,
  dispatcherStarted,
  engineEnv,
  engineStorage,
  flashcardRequest,
  inExecute,
  JobRowCount,
  pollJob,
  queryRows,
  startProgram,
  tokenFor,
  withDatabase,
  workerStarted
} from "./support/engine.js"

describe("issue 4: crash recovery with real processes", () => {
  it.live(
    "a worker killed with SIGKILL during EXECUTE: another worker finishes the job, one set of artifacts, attempt 2",
    () =>
      Effect.gen(function*() {
        const storage = yield* engineStorage("kill9")
        // Worker A is slow (EXECUTE lasts 20 s), so it is surely inside EXECUTE when it dies.
        const [api, , doomed] = yield* Effect.all(
          [
            startProgram("api", "api", engineEnv(storage)),
            startProgram("dispatcher", "dispatcher", engineEnv(storage), { ready: dispatcherStarted }),
            startProgram(
              "worker",
              "worker A",
              engineEnv(storage, { WORKER_ID: "worker-a", SYNTHETIC_LATENCY_MS: "20000" }),
              {
                ready: workerStarted
              }
            )
          ],
          { concurrency: "unbounded" }
        )
        const token = yield* tokenFor(storage, "kill9-user")
        const job = yield* createJob(api.baseUrl, token, "flashcard-generations", flashcardRequest(1))

        // EXECUTE has begun once progress passed RESOLVE; then A's lease is a few heartbeats old.
        yield* pollJob(api.baseUrl, token, job.jobId, {
          until: inExecute,
          timeout: Duration.seconds(20)
        })
        const before = yield* awaitLease(storage, job.jobId, (row) => row.lockedBy === "worker-a", Duration.seconds(5))
        expect(before.attemptCount).toBe(1)
        yield* Effect.sleep(Duration.millis(1500))

        yield* doomed.signal("SIGKILL")
        const died = yield* doomed.awaitExit(Duration.seconds(5))
        expect(died.signal).toBe("SIGKILL")
        const killedAt = Date.now()

        yield* startProgram(
          "worker",
          "worker B",
          engineEnv(storage, { WORKER_ID: "worker-b", SYNTHETIC_LATENCY_MS: "100" }),
          {
            ready: workerStarted
          }
        )
        // Lease 3 s + grace 1 s + reaper 0.5 s + a dispatch + worker B's start: about 5 s. The queue's
        // own lock on A's delivery (60 s on ai-background, docs/architecture.md §7.1) must not be what brings it back.
        const done = yield* pollJob(api.baseUrl, token, job.jobId, {
          timeout: Duration.seconds(25),
          every: Duration.millis(200)
        })
        const recoveredInMs = Date.now() - killedAt
        expect(done.lifecycleStatus).toBe("succeeded")

        const after = yield* awaitLease(storage, job.jobId, () => true, Duration.seconds(1))
        expect(after.attemptCount).toBe(2)
        expect(after.lockedBy).toBe("worker-b")

        const counts = yield* artifactCounts(storage)
        expect(counts).toHaveLength(1)
        const [set] = counts
        const cards = yield* withDatabase(
          storage,
          queryRows(JobRowCount, "SELECT job_id, COUNT(*) AS n FROM flashcard GROUP BY job_id")
        )
        expect(cards).toEqual([{ jobId: job.jobId, n: set?.artifacts }])
        expect(set?.distinctOrdinals).toBe(set?.artifacts)
        expect(done.result?.artifactCount).toBe(set?.artifacts)
        console.log(`kill -9 recovery: ${recoveredInMs} ms after the kill`)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
