import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Schema } from "effect"
import { childEnv } from "./support/childProcess.js"
import {
  artifactCounts,
  awaitLease,
  createJob,
  dispatcherStarted,
  engineEnv,
  engineStorage,
  executeSettleMs,
  flashcardRequest,
  httpRequest,
  inExecute,
  leaseOf,
  pollJob,
  queryRows,
  type RunningProgram,
  startProgram,
  tokenFor,
  withDatabase,
  workerStarted
} from "./support/engine.js"

/** SIGTERM (or `signal`), then the exit: 0, within `within`. Returns how long it took. */
const terminate = (program: RunningProgram, within: Duration.DurationInput, signal: "SIGTERM" | "SIGINT" = "SIGTERM") =>
  Effect.gen(function*() {
    const started = Date.now()
    yield* program.signal(signal)
    const exit = yield* program.awaitExit(within)
    expect(exit, `${program.name} exit\n${program.tail()}`).toEqual({ code: 0, signal: null })
    return Date.now() - started
  })

const OutboxRow = Schema.Struct({ status: Schema.String, n: Schema.Number })

describe("issue 7: SIGTERM to every process type exits 0 and loses nothing", () => {
  it.live(
    "api, dispatcher and worker (the worker mid-EXECUTE hands its job to another worker)",
    () =>
      Effect.gen(function*() {
        const storage = yield* engineStorage("sigterm")
        const [api, firstDispatcher, workerA] = yield* Effect.all(
          [
            startProgram("api", "api", engineEnv(storage, { MAX_ACTIVE_JOBS_PER_USER: "50" })),
            startProgram("dispatcher", "dispatcher 1", engineEnv(storage), { ready: dispatcherStarted }),
            startProgram(
              "worker",
              "worker A",
              engineEnv(storage, { WORKER_ID: "worker-a", SYNTHETIC_LATENCY_MS: "15000" }),
              {
                ready: workerStarted
              }
            )
          ],
          { concurrency: "unbounded" }
        )
        const token = yield* tokenFor(storage, "sigterm-user")

        // The worker: SIGTERM while its job is in EXECUTE (15 s of provider latency).
        const slow = yield* createJob(api.baseUrl, token, "flashcard-generations", flashcardRequest(0))
        yield* pollJob(api.baseUrl, token, slow.jobId, {
          until: inExecute,
          timeout: Duration.seconds(20)
        })
        yield* Effect.sleep(Duration.millis(executeSettleMs))
        yield* awaitLease(storage, slow.jobId, (row) => row.lockedBy === "worker-a", Duration.seconds(5))
        const workerB = yield* startProgram(
          "worker",
          "worker B",
          engineEnv(storage, { WORKER_ID: "worker-b", SYNTHETIC_LATENCY_MS: "50" }),
          { ready: workerStarted }
        )
        const workerStopMs = yield* terminate(workerA, Duration.seconds(15))
        // Released as it left: no lease to wait out (unless worker B has taken the job already).
        const released = yield* leaseOf(storage, slow.jobId)
        expect(released.lockUntil === null || released.lockedBy === "worker-b", JSON.stringify(released)).toBe(true)
        expect(workerA.output()).toContain("job handed back: lock released for another worker")
        const handedOffAt = Date.now()
        const finished = yield* pollJob(api.baseUrl, token, slow.jobId, { timeout: Duration.seconds(30) })
        const takeoverMs = Date.now() - handedOffAt
        expect(finished.lifecycleStatus).toBe("succeeded")
        const after = yield* leaseOf(storage, slow.jobId)
        expect(after.lockedBy).toBe("worker-b")
        // A hand-off costs no attempt (issue 18): the job finished in its first.
        expect(after.attemptCount).toBe(1)

        // The dispatcher: SIGTERM in the middle of a burst of creations; a second one carries on.
        const burst = Effect.forEach(
          Array.from({ length: 12 }, (_, i) => i + 1),
          (i) => createJob(api.baseUrl, token, "flashcard-generations", flashcardRequest(i)),
          { concurrency: 4 }
        )
        const [created, dispatcherStopMs] = yield* Effect.all(
          [
            burst,
            Effect.zipRight(Effect.sleep(Duration.millis(150)), terminate(firstDispatcher, Duration.seconds(15)))
          ],
          { concurrency: "unbounded" }
        )
        const stuck = yield* withDatabase(
          storage,
          queryRows(OutboxRow, "SELECT status, COUNT(*) AS n FROM outbox_event GROUP BY status")
        )
        expect(stuck.find((row) => row.status === "processing")).toBeUndefined()
        yield* startProgram("dispatcher", "dispatcher 2", engineEnv(storage), { ready: dispatcherStarted })
        const done = yield* Effect.forEach(created, (job) => pollJob(api.baseUrl, token, job.jobId), { concurrency: 4 })
        expect(done.every((job) => job.lifecycleStatus === "succeeded")).toBe(true)

        // The API: a creation answered just before SIGTERM is stored; the process drains and exits 0.
        const last = yield* createJob(api.baseUrl, token, "flashcard-generations", flashcardRequest(99))
        const apiStopMs = yield* terminate(api, Duration.seconds(15))
        const lastRow = yield* leaseOf(storage, last.jobId)
        expect(["queued", "running", "succeeded"]).toContain(lastRow.lifecycleStatus)

        // An idle worker: exits 0 too; by then it has run the last job.
        yield* awaitLease(storage, last.jobId, (row) => row.lifecycleStatus === "succeeded", Duration.seconds(20))
        const idleWorkerStopMs = yield* terminate(workerB, Duration.seconds(15))

        const counts = yield* artifactCounts(storage)
        expect(counts).toHaveLength(created.length + 2)
        expect(counts.every((set) => set.artifacts > 0 && set.distinctOrdinals === set.artifacts)).toBe(true)
        console.log(
          `SIGTERM → exit 0: worker mid-job ${workerStopMs} ms (taken over ${takeoverMs} ms later), dispatcher ${dispatcherStopMs} ms, ` +
            `api ${apiStopMs} ms, idle worker ${idleWorkerStopMs} ms`
        )
      }).pipe(Effect.scoped),
    { timeout: 90_000 }
  )

  it.live(
    "rolling SIGTERM of every worker under load fails no job and uses no attempt (issue 18)",
    () =>
      Effect.gen(function*() {
        const storage = yield* engineStorage("rolling")
        const workerEnv = (id: string) =>
          engineEnv(storage, { WORKER_ID: id, SYNTHETIC_LATENCY_MS: "8000", WORKER_CONCURRENCY_BACKGROUND: "4" })
        const [api] = yield* Effect.all(
          [
            startProgram("api", "api", engineEnv(storage, { MAX_ACTIVE_JOBS_PER_USER: "50" })),
            startProgram("dispatcher", "dispatcher", engineEnv(storage), { ready: dispatcherStarted })
          ],
          { concurrency: "unbounded" }
        )
        let current = yield* startProgram("worker", "worker 0", workerEnv("worker-0"), { ready: workerStarted })
        const token = yield* tokenFor(storage, "rolling-user")
        const created = yield* Effect.forEach(
          Array.from({ length: 8 }, (_, i) => i),
          (i) => createJob(api.baseUrl, token, "flashcard-generations", flashcardRequest(i)),
          { concurrency: 4 }
        )
        // A deploy: each worker is replaced while jobs are in flight (more hand-offs than attempts).
        for (let generation = 1; generation <= 3; generation++) {
          const next = yield* startProgram("worker", `worker ${generation}`, workerEnv(`worker-${generation}`), {
            ready: workerStarted
          })
          yield* terminate(current, Duration.seconds(15))
          expect(current.output()).toContain("job handed back: lock released for another worker")
          current = next
        }
        const done = yield* Effect.forEach(
          created,
          (job) => pollJob(api.baseUrl, token, job.jobId, { timeout: Duration.seconds(60) }),
          {
            concurrency: 4
          }
        )
        expect(done.map((job) => job.lifecycleStatus)).toStrictEqual(created.map(() => "succeeded"))
        const leases = yield* Effect.forEach(created, (job) => leaseOf(storage, job.jobId))
        expect(leases.map((row) => row.attemptCount)).toStrictEqual(created.map(() => 1))
      }).pipe(Effect.scoped),
    { timeout: 240_000 }
  )

  it.live(
    "all-in-one on MySQL + Redis, mid-job: exits 0, releases the job, and the next start finishes it",
    () =>
      Effect.gen(function*() {
        const storage = yield* engineStorage("sigterm_aio", { migrate: false })
        // It migrates its own (empty) database on start.
        const first = yield* startProgram(
          "all-in-one",
          "all-in-one 1",
          engineEnv(storage, { MIGRATE_ON_START: "true", SYNTHETIC_LATENCY_MS: "15000" })
        )
        const token = yield* tokenFor(storage, "aio-user")
        const job = yield* createJob(first.baseUrl, token, "flashcard-generations", flashcardRequest(1))
        yield* pollJob(first.baseUrl, token, job.jobId, {
          until: inExecute,
          timeout: Duration.seconds(20)
        })
        yield* Effect.sleep(Duration.millis(executeSettleMs))
        const stopMs = yield* terminate(first, Duration.seconds(15))
        const released = yield* leaseOf(storage, job.jobId)
        expect(released.lifecycleStatus).toBe("running")
        expect(released.lockUntil).toBeNull()

        const second = yield* startProgram(
          "all-in-one",
          "all-in-one 2",
          engineEnv(storage, { SYNTHETIC_LATENCY_MS: "50" })
        )
        const done = yield* pollJob(second.baseUrl, token, job.jobId, { timeout: Duration.seconds(30) })
        expect(done.lifecycleStatus).toBe("succeeded")
        // A hand-off costs no attempt (issue 18).
        expect((yield* leaseOf(storage, job.jobId)).attemptCount).toBe(1)
        const secondStopMs = yield* terminate(second, Duration.seconds(15))
        console.log(`all-in-one SIGTERM → exit 0: mid-job ${stopMs} ms, idle ${secondStopMs} ms`)
      }).pipe(Effect.scoped),
    { timeout: 75_000 }
  )

  it.live("all-in-one embedded: SIGINT (Ctrl-C) exits 0 too", () =>
    Effect.gen(function*() {
      const embedded = yield* startProgram("all-in-one", "embedded", childEnv({}))
      const ready = yield* httpRequest("GET", `${embedded.baseUrl}/readyz`)
      expect(ready.status).toBe(200)
      const stopMs = yield* terminate(embedded, Duration.seconds(10), "SIGINT")
      console.log(`embedded all-in-one SIGINT → exit 0 in ${stopMs} ms`)
    }).pipe(Effect.scoped), { timeout: 30_000 })
})
