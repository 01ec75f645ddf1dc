import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Exit, Layer, Scope, TestClock } from "effect"
import { hostname } from "node:os"
import { workerIdFromConfig, workerQueuesConfig, WorkerSettings } from "../../../src/config/WorkerSettings.js"
import { SyntheticGatewayControl } from "../../../src/layers/gateway/SyntheticGateway.js"
import { makeDispatcher } from "../../../src/pipeline/outbox/dispatcher.js"
import { runWorker, WorkerServiceLive } from "../../../src/pipeline/worker.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { OutboxRepository } from "../../../src/services/outbox/OutboxRepository.js"
import { WorkerDirectory } from "../../../src/services/WorkerDirectory.js"
import { awaitStatus, memoryEngineStack, settle } from "../../support/engineStack.js"
import { LogCapture, LogCaptureLayer } from "../../support/logCapture.js"

const withEnv = (env: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

const createEcho = (message: string) =>
  Effect.flatMap(
    AiJobService,
    (service) =>
      service.createJob({
        userId: "user-1",
        jobType: "synthetic_echo",
        targetType: "test",
        targetId: "t",
        input: { message }
      })
  ).pipe(
    Effect.map(({ job }) => job)
  )

const liveWorkers = Effect.flatMap(WorkerDirectory, (directory) => directory.live)

describe("WORKER_QUEUES and WORKER_ID", () => {
  it.effect("WORKER_QUEUES defaults to both queues, and lists the named ones in the queues' own order, trimmed", () =>
    Effect.gen(function*() {
      expect(yield* workerQueuesConfig.pipe(withEnv({}))).toStrictEqual(["ai-interactive", "ai-background"])
      expect(yield* workerQueuesConfig.pipe(withEnv({ WORKER_QUEUES: "ai-background" }))).toStrictEqual([
        "ai-background"
      ])
      expect(yield* workerQueuesConfig.pipe(withEnv({ WORKER_QUEUES: " ai-background , ai-interactive ," })))
        .toStrictEqual(["ai-interactive", "ai-background"])
    }))

  it.effect("WORKER_QUEUES naming no queue, or an unknown one, is refused with the names it accepts", () =>
    Effect.gen(function*() {
      for (const value of ["", " , ", "ai-interactive,ai-batch", "interactive"]) {
        const exit = yield* Effect.exit(workerQueuesConfig.pipe(withEnv({ WORKER_QUEUES: value })))
        expect(Exit.isFailure(exit), `WORKER_QUEUES=${JSON.stringify(value)}`).toBe(true)
        if (Exit.isFailure(exit)) {
          expect(String(exit.cause)).toContain(
            "WORKER_QUEUES must name one or more of ai-interactive, ai-background, comma-separated"
          )
        }
      }
    }))

  it.effect("WORKER_ID names the lock owner; without it the id is worker-{host}-{pid}-{12 random characters}, fresh each time", () =>
    Effect.gen(function*() {
      expect(yield* workerIdFromConfig.pipe(withEnv({ WORKER_ID: "worker-7" }))).toBe("worker-7")
      const first = yield* workerIdFromConfig.pipe(withEnv({}))
      const second = yield* workerIdFromConfig.pipe(withEnv({}))
      const prefix = `worker-${hostname()}-${process.pid}-`
      for (const id of [first, second]) {
        expect(id.startsWith(prefix)).toBe(true)
        expect(id.slice(prefix.length)).toHaveLength(12)
      }
      expect(first).not.toBe(second)
    }))
})

describe("a worker in the worker directory (memory layers, TestClock)", () => {
  it.scoped("shows its queues and running jobs within the coalescing window, stays live by its beats, and leaves on shutdown", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      yield* control.script([{ _tag: "Delay", duration: Duration.millis(200_000) }])
      const workerScope = yield* Scope.make()
      const startedAt = new Date(yield* TestClock.currentTimeMillis).toISOString()
      yield* Effect.gen(function*() {
        const dispatcher = yield* makeDispatcher
        yield* Effect.forkScoped(dispatcher.run)
        yield* runWorker({ workerId: "worker-dir", queues: ["ai-interactive"] })
      }).pipe(Scope.extend(workerScope))
      yield* settle
      const [first] = yield* liveWorkers
      expect(first).toStrictEqual({
        instanceId: "worker-dir",
        hostname: hostname(),
        pid: process.pid,
        queues: ["ai-interactive"],
        jobIds: [],
        startedAt,
        beatAt: startedAt
      })

      const job = yield* createEcho("in the directory")
      yield* awaitStatus(job.id, ["running"], { stepMs: 10 })
      // The lock is heard at once and shown within the coalescing window (250 ms), long before the 30 s beat.
      yield* TestClock.adjust(300)
      yield* settle
      expect((yield* liveWorkers).map((worker) => worker.jobIds)).toStrictEqual([[job.id]])

      // Beats every 30 s keep the entry (90 s TTL) live well past its first expiry.
      for (let step = 0; step < 6; step++) {
        yield* TestClock.adjust(30_000)
        yield* settle
      }
      const later = yield* liveWorkers
      expect(later.map((worker) => [worker.instanceId, worker.startedAt])).toStrictEqual([["worker-dir", startedAt]])
      expect(Date.parse(later[0]!.beatAt) - Date.parse(startedAt)).toBeGreaterThanOrEqual(150_000)

      yield* awaitStatus(job.id, ["succeeded", "failed"], { stepMs: 1_000 })
      yield* TestClock.adjust(300)
      yield* settle
      expect((yield* liveWorkers).map((worker) => worker.jobIds)).toStrictEqual([[]])
      // No change, no beat until the periodic one.
      const quietSince = (yield* liveWorkers)[0]!.beatAt
      yield* TestClock.adjust(10_000)
      yield* settle
      expect((yield* liveWorkers)[0]!.beatAt).toBe(quietSince)

      yield* Scope.close(workerScope, Exit.void)
      expect(yield* liveWorkers).toStrictEqual([])
      const lines = yield* Effect.flatMap(LogCapture, (capture) => capture.lines)
      const started = lines.filter((line) => line.includes("worker started"))
      expect(started).toHaveLength(1)
      expect(started[0]).toContain("workerId=worker-dir")
      expect(started[0]).toContain("queues=ai-interactive")
      expect(lines.filter((line) => line.includes("worker stopping: running jobs handed back"))).toHaveLength(1)
    }).pipe(
      Effect.provide(LogCaptureLayer),
      Effect.provide(
        memoryEngineStack({
          timing: { jobLockTtl: Duration.millis(60_000), jobHeartbeatInterval: Duration.millis(20_000) }
        })
      )
    ))

  it.scoped("consumes only the queues it serves", () =>
    Effect.gen(function*() {
      const dispatcher = yield* makeDispatcher
      yield* Effect.forkScoped(dispatcher.run)
      yield* runWorker({ workerId: "background-only", queues: ["ai-background"] })
      // synthetic_echo goes to ai-interactive: nobody here serves it.
      const job = yield* createEcho("not for this worker")
      for (let step = 0; step < 20; step++) {
        yield* TestClock.adjust(100)
        yield* settle
      }
      const now = yield* awaitStatus(job.id, ["queued"])
      expect(now.lifecycleStatus).toBe("queued")
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("its start line names every queue it serves, comma-separated", () =>
    Effect.gen(function*() {
      yield* runWorker({ workerId: "both-queues", queues: ["ai-interactive", "ai-background"] })
      const lines = yield* Effect.flatMap(LogCapture, (capture) => capture.lines)
      const started = lines.filter((line) => line.includes("worker started"))
      expect(started).toHaveLength(1)
      expect(started[0]).toContain("queues=ai-interactive,ai-background")
    }).pipe(Effect.provide(LogCaptureLayer), Effect.provide(memoryEngineStack())))

  it.scoped("the worker layer serves WORKER_QUEUES under WORKER_ID, and runs the reaper beside it", () =>
    Effect.gen(function*() {
      const jobs = yield* AiJobLifecycleRepository
      const outbox = yield* OutboxRepository
      // An orphan for the reaper: locked by a worker that died, its create event long gone.
      const orphan = yield* createEcho("orphan")
      yield* outbox.claimBatch("gone", 10)
      yield* jobs.lockJob(orphan.id, "dead-worker", Duration.millis(1_000))
      yield* Layer.build(WorkerServiceLive.pipe(Layer.provide(WorkerSettings.layer))).pipe(
        withEnv({ WORKER_ID: "worker-layer", WORKER_QUEUES: "ai-interactive" })
      )
      yield* settle
      expect((yield* liveWorkers).map((worker) => [worker.instanceId, worker.queues])).toStrictEqual([["worker-layer", [
        "ai-interactive"
      ]]])
      // The reaper (every 5 s, grace 5 s) queues the orphan again; with no dispatcher here the event waits in the outbox.
      for (let step = 0; step < 30; step++) {
        yield* TestClock.adjust(500)
        yield* settle
      }
      const pending = yield* outbox.claimBatch("inspector", 10)
      expect(pending.map((event) => event.dedupeKey)).toContainEqual(
        expect.stringContaining(`ai.job.redispatch:${orphan.id}:`)
      )
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("chained hand-offs: a job handed back to a worker that is itself stopping goes straight to the next one, no attempt used, nothing logged as a warning", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      yield* control.script([{ _tag: "Hang" }])
      const startWorker = (workerId: string) =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const engine = yield* runWorker({ workerId, queues: ["ai-interactive"] }).pipe(Scope.extend(scope))
          return { scope, engine }
        })
      const dispatcher = yield* makeDispatcher
      yield* Effect.forkScoped(dispatcher.run)
      const first = yield* startWorker("worker-a")
      const job = yield* createEcho("handed along")
      yield* awaitStatus(job.id, ["running"], { stepMs: 10 })
      // The next worker is stopping too (its engine refuses work while its consumer still takes it).
      const second = yield* startWorker("worker-b")
      yield* second.engine.handOffAll
      yield* Scope.close(first.scope, Exit.void)
      yield* settle
      // Handed back twice, as many times as the queue has attempts: a live worker still gets it at once.
      yield* startWorker("worker-c")
      const done = yield* awaitStatus(job.id, ["succeeded", "failed"], { stepMs: 10, maxSteps: 100 })
      expect([done.lifecycleStatus, done.lockedBy, done.attemptCount]).toStrictEqual(["succeeded", "worker-c", 1])
      const lines = yield* Effect.flatMap(LogCapture, (capture) => capture.lines)
      expect(lines.filter((line) => line.startsWith("WARN") || line.startsWith("ERROR"))).toStrictEqual([])
      expect(
        lines.filter((line) =>
          line.startsWith("INFO") && line.includes("Queue delivery handed back by a stopping consumer")
        )
      ).toHaveLength(2)
      expect(
        lines.filter((line) =>
          line.includes("job handed back: lock released for another worker") && line.startsWith("INFO")
        )
      ).toHaveLength(1)
    }).pipe(Effect.provide(LogCaptureLayer), Effect.provide(memoryEngineStack())))
})
