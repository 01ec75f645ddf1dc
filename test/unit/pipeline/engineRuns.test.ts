import { describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, Duration, Effect, Exit, Fiber, Layer, Metric, Option, Queue, TestClock } from "effect"
import { getEventListeners } from "node:events"
import type { AiJob } from "../../../src/domain/AiJob.js"
import { ProviderError } from "../../../src/domain/ExecutionError.js"
import { defineJobType } from "../../../src/domain/JobType.js"
import { PersistenceError } from "../../../src/domain/PersistenceError.js"
import { jobCatalog } from "../../../src/jobs/catalog.js"
import { syntheticEchoDefinition, SyntheticEchoInput } from "../../../src/jobs/synthetic_echo/definition.js"
import { syntheticEchoJobType } from "../../../src/jobs/synthetic_echo/index.js"
import { SyntheticEchoOutput } from "../../../src/jobs/synthetic_echo/output.js"
import { SyntheticGatewayControl } from "../../../src/layers/gateway/SyntheticGateway.js"
import { makeExecutionEngine } from "../../../src/pipeline/engine.js"
import { AiGateway, type GatewayError } from "../../../src/services/AiGateway.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { ArtifactRepository } from "../../../src/services/ArtifactRepository.js"
import { CredentialVault } from "../../../src/services/CredentialVault.js"
import { activeJobs } from "../../../src/services/EngineMetrics.js"
import { JobEvents } from "../../../src/services/JobEvents.js"
import { reportProgress } from "../../../src/services/JobProgress.js"
import { payloadFor } from "../../../src/services/JobQueue.js"
import { definePromptTemplate } from "../../../src/services/PromptTemplates.js"
import { ResultProjectors } from "../../../src/services/ResultProjectors.js"
import { UnitOfWork } from "../../../src/services/UnitOfWork.js"
import { UsageLog } from "../../../src/services/UsageLog.js"
import { memoryEngineStack, settle } from "../../support/engineStack.js"
import { LogCapture, LogCaptureLayer } from "../../support/logCapture.js"

const heartbeatMs = 5_000

const createEcho = (message: string, jobType = "synthetic_echo") =>
  Effect.flatMap(
    AiJobService,
    (service) =>
      service.createJob({ userId: "user-1", jobType, targetType: "test", targetId: message, input: { message } })
  ).pipe(
    Effect.map(({ job }) => job)
  )

const deliveryOf = (job: AiJob, signal = new AbortController().signal, traceParent?: string | null) => ({
  queueName: job.queueName,
  queueJobId: `aijob-${job.id}`,
  payload: payloadFor({
    jobId: job.id,
    jobType: job.jobType,
    createdAt: job.createdAt,
    ...(traceParent === undefined ? {} : { traceParent })
  }),
  attempt: 1,
  maxAttempts: 3,
  signal
})

const jobNow = (jobId: string) =>
  Effect.flatMap(AiJobLifecycleRepository, (jobs) => Effect.map(jobs.findById(jobId), Option.getOrThrow))

/** Moves the clock in small steps until `fiber` ends. */
const joinMoving = <A, E>(fiber: Fiber.Fiber<A, E>, stepMs = 100) =>
  Effect.gen(function*() {
    for (let step = 0; step < 3_000 && Option.isNone(yield* Fiber.poll(fiber)); step++) {
      yield* TestClock.adjust(stepMs)
      yield* Effect.yieldNow()
    }
    return yield* Fiber.await(fiber)
  })

/** A provider that keeps every prompt it is sent and answers the n-th call (1-based) with `answer(n)`'s JSON. */
const promptRecordingGateway = (answer: (call: number) => Effect.Effect<unknown, GatewayError>) => {
  const prompts: Array<string> = []
  const gateway = Layer.succeed(AiGateway, {
    generate: (request) =>
      Effect.suspend(() => {
        prompts.push(request.messages.map((message) => message.content).join("\n"))
        return Effect.map(answer(prompts.length), (json) => ({
          text: JSON.stringify(json),
          json,
          usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 },
          provider: request.provider,
          model: request.model,
          latencyMs: 1,
          finishReason: "stop"
        }))
      })
  })
  return { gateway, prompts }
}

const usageCodes = (jobId: string) =>
  Effect.map(
    Effect.flatMap(UsageLog, (usage) => usage.listByJobId(jobId)),
    (rows) => rows.map((row) => [row.attemptNo, row.errorCode])
  )

const steadyEcho = {
  ...syntheticEchoJobType,
  spec: defineJobType({
    definition: {
      ...syntheticEchoDefinition,
      jobType: "steady_echo",
      execution: { ...syntheticEchoDefinition.execution, cancellable: false }
    },
    input: SyntheticEchoInput,
    output: SyntheticEchoOutput
  }),
  prompts: [
    definePromptTemplate({
      jobType: "steady_echo",
      version: "v1",
      input: SyntheticEchoInput,
      render: ({ input }) => [{ role: "user", content: JSON.stringify({ echo: input.message }) }]
    })
  ]
}

describe("one run of the execution engine (memory layers, TestClock)", () => {
  it.scoped("the queue taking the delivery back hands the run off: the call is interrupted, the lock released, the delivery failed", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      yield* control.script([{ _tag: "Hang" }])
      const engine = yield* makeExecutionEngine("worker-abort")
      const job = yield* createEcho("taken back")
      const controller = new AbortController()
      const run = yield* Effect.fork(engine.run(deliveryOf(job, controller.signal)))
      for (let i = 0; i < 5; i++) {
        yield* TestClock.adjust(10)
        yield* settle
      }
      expect(yield* engine.runningJobIds).toStrictEqual([job.id])
      controller.abort()
      const ended = yield* Fiber.await(run)
      expect(ended).toMatchObject({ _tag: "Failure" })
      expect(Exit.isFailure(ended) && ended.cause._tag === "Fail" && ended.cause.error).toMatchObject({
        _tag: "JobHandedOff",
        jobId: job.id
      })
      const after = yield* jobNow(job.id)
      expect([after.lifecycleStatus, after.lockedBy, after.attemptCount]).toStrictEqual(["running", null, 1])
      expect((yield* control.calls).map((call) => call.outcome)).toStrictEqual(["interrupted"])
      expect(yield* engine.runningJobIds).toStrictEqual([])

      // A delivery already taken back when it starts is handed off at once, before any call.
      const gone = new AbortController()
      gone.abort()
      const again = yield* Effect.exit(engine.run(deliveryOf(after, gone.signal)))
      expect(Exit.isFailure(again)).toBe(true)
      expect(yield* control.calls).toHaveLength(1)
      expect((yield* jobNow(job.id)).lockedBy).toBeNull()
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a taken-over job whose cancel was requested meanwhile is cancelled at once, without a call; one that cannot be cancelled runs", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      const jobs = yield* AiJobLifecycleRepository
      const engine = yield* makeExecutionEngine("worker-next")
      const orphanOf = (jobType: string) =>
        Effect.gen(function*() {
          const job = yield* createEcho(`orphan of ${jobType}`, jobType)
          yield* jobs.lockJob(job.id, "dead-worker", Duration.millis(1_000))
          yield* jobs.requestCancel(job.id)
          return job
        })
      const cancellable = yield* orphanOf("synthetic_echo")
      const steady = yield* orphanOf("steady_echo")
      yield* TestClock.adjust(2_000)
      yield* engine.run(deliveryOf(cancellable))
      const cancelled = yield* jobNow(cancellable.id)
      expect([cancelled.lifecycleStatus, cancelled.lockedBy]).toStrictEqual(["cancelled", "worker-next"])
      expect(yield* control.calls).toStrictEqual([])
      const run = yield* Effect.fork(engine.run(deliveryOf(steady)))
      yield* joinMoving(run)
      expect((yield* jobNow(steady.id)).lifecycleStatus).toBe("succeeded")
    }).pipe(Effect.provide(memoryEngineStack({ modules: [...jobCatalog, steadyEcho] }))))

  it.scoped("no database to read the job with gives the delivery back; so does a stopping worker, without touching the job", () =>
    Effect.gen(function*() {
      const engine = yield* makeExecutionEngine("worker-flaky").pipe(
        // The lock lost the job (a row another transaction held), then the read of it fails.
        Effect.updateService(AiJobLifecycleRepository, (jobs) => ({
          ...jobs,
          lockQueued: (requests) => Effect.succeed(requests.map(() => Option.none())),
          findById: () => Effect.fail(new PersistenceError({ operation: "ai_job.read", message: "db down" }))
        }))
      )
      const job = yield* createEcho("unreadable")
      const unread = yield* Effect.flip(engine.run(deliveryOf(job)))
      expect(unread).toMatchObject({
        _tag: "JobHandedOff",
        jobId: job.id,
        reason: "storage unavailable during PREPARE"
      })
      // A storage failure is a failed delivery (an attempt, the backoff), not a stopping worker's hand-back.
      expect(unread).toMatchObject({ consumerStopping: false })
      const warned = (yield* (yield* LogCapture).lines).filter((line) =>
        line.includes("PREPARE failed; the delivery goes back to the queue")
      )
      expect(warned).toHaveLength(1)
      expect(warned[0]).toContain("operation=ai_job.read")
      expect(warned[0]).toContain("workerId=worker-flaky")
      expect(warned[0]).toContain(`jobId=${job.id}`)

      // The lock itself fails.
      const lockless = yield* makeExecutionEngine("worker-lockless").pipe(
        Effect.updateService(AiJobLifecycleRepository, (jobs) => ({
          ...jobs,
          lockQueued: () => Effect.fail(new PersistenceError({ operation: "ai_job.lock", message: "db down" }))
        }))
      )
      const unlocked = yield* Effect.flip(lockless.run(deliveryOf(job, undefined, null)))
      expect(unlocked).toMatchObject({ _tag: "JobHandedOff", reason: "storage unavailable during PREPARE" })
      expect((yield* jobNow(job.id)).lifecycleStatus).toBe("queued")

      const stopping = yield* makeExecutionEngine("worker-stopping")
      yield* stopping.handOffAll
      const refused = yield* Effect.flip(stopping.run(deliveryOf(job)))
      expect(refused).toMatchObject({
        _tag: "JobHandedOff",
        jobId: job.id,
        reason: "worker stopping",
        consumerStopping: true
      })
      expect((yield* jobNow(job.id)).lifecycleStatus).toBe("queued")
    }).pipe(Effect.provide(LogCaptureLayer), Effect.provide(memoryEngineStack())))

  it.scoped("a delivery carrying its trace context is locked without a read first and runs to succeeded", () =>
    Effect.gen(function*() {
      const engine = yield* makeExecutionEngine("worker-traced").pipe(
        Effect.updateService(
          AiJobLifecycleRepository,
          (jobs) => ({ ...jobs, findById: () => Effect.die("read before the lock") })
        )
      )
      const job = yield* createEcho("traced")
      const run = yield* Effect.fork(
        engine.run(deliveryOf(job, undefined, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
      )
      expect(Exit.isSuccess(yield* joinMoving(run))).toBe(true)
      expect((yield* jobNow(job.id)).lifecycleStatus).toBe("succeeded")
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("the running set and the active-jobs gauge follow each run; a skipped delivery never enters them", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      yield* control.script([{ _tag: "Delay", duration: Duration.millis(1_000) }])
      const engine = yield* makeExecutionEngine("worker-count")
      const job = yield* createEcho("counted")
      const run = yield* Effect.fork(engine.run(deliveryOf(job)))
      yield* TestClock.adjust(10)
      yield* settle
      expect(yield* engine.runningJobIds).toStrictEqual([job.id])
      expect((yield* Metric.value(activeJobs)).value).toBe(1)
      yield* joinMoving(run)
      expect(yield* engine.runningJobIds).toStrictEqual([])
      expect((yield* Metric.value(activeJobs)).value).toBe(0)
      // Done: a duplicate delivery is skipped.
      yield* engine.run(deliveryOf(job))
      expect(yield* engine.runningJobIds).toStrictEqual([])
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("RESOLVE is retried once on a storage error; a second one fails the job as INTERNAL_PERSISTENCE without a call", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      let reads = 0
      // RESOLVE's own read: the keys (the snapshot came with PREPARE's lock).
      const failReads = (failures: number) =>
        Effect.updateService(CredentialVault, (vault) =>
          CredentialVault.make({
            ...vault,
            resolve: (request) =>
              Effect.suspend(() => {
                reads += 1
                return reads <= failures
                  ? Effect.fail(new PersistenceError({ operation: "ai_credential.read", message: "db down" }))
                  : vault.resolve(request)
              })
          }))
      const once = yield* makeExecutionEngine("worker-resolve").pipe(failReads(1))
      const recovered = yield* createEcho("read twice")
      yield* joinMoving(yield* Effect.fork(once.run(deliveryOf(recovered))))
      expect([(yield* jobNow(recovered.id)).lifecycleStatus, reads]).toStrictEqual(["succeeded", 2])

      reads = 0
      const always = yield* makeExecutionEngine("worker-resolve-2").pipe(failReads(100))
      const doomed = yield* createEcho("never read")
      yield* joinMoving(yield* Effect.fork(always.run(deliveryOf(doomed))))
      const failed = yield* jobNow(doomed.id)
      expect([failed.lifecycleStatus, failed.errorCode, reads]).toStrictEqual(["failed", "INTERNAL_PERSISTENCE", 2])
      expect(failed.internalErrorMessage).toBe(
        "InternalError INTERNAL_PERSISTENCE after 0 provider call(s): ai_credential.read: db down"
      )
      expect((yield* control.calls).filter((call) => call.jobId === doomed.id)).toStrictEqual([])
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a projection that fails for good fails the job; its call's usage row is still written, once", () =>
    Effect.gen(function*() {
      let records = 0
      const engine = yield* makeExecutionEngine("worker-project").pipe(
        Effect.updateService(ArtifactRepository, (artifacts) => ({
          ...artifacts,
          record: () =>
            Effect.suspend(() => {
              records += 1
              return Effect.fail(new PersistenceError({ operation: "ai_artifact.insert", message: "disk full" }))
            })
        }))
      )
      const job = yield* createEcho("unprojectable")
      yield* joinMoving(yield* Effect.fork(engine.run(deliveryOf(job))))
      const failed = yield* jobNow(job.id)
      expect([failed.lifecycleStatus, failed.errorCode, records]).toStrictEqual(["failed", "INTERNAL_PERSISTENCE", 2])
      expect(failed.internalErrorMessage).toContain("after 1 provider call(s)")
      expect(yield* usageCodes(job.id)).toStrictEqual([[1, null]])
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a validated output is shown as progress 80 while PROJECT waits", () =>
    Effect.gen(function*() {
      const inProject = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const engine = yield* makeExecutionEngine("worker-progress").pipe(
        // Paused as PROJECT looks its projector up, before its transaction holds the job's row.
        Effect.updateService(ResultProjectors, (projectors) => ({
          ...projectors,
          get: (key) =>
            Effect.zipRight(
              Effect.zipRight(Deferred.succeed(inProject, undefined), Deferred.await(release)),
              projectors.get(key)
            )
        }))
      )
      const job = yield* createEcho("almost there")
      const run = yield* Effect.fork(engine.run(deliveryOf(job)))
      for (let step = 0; step < 100 && !(yield* Deferred.isDone(inProject)); step++) {
        yield* TestClock.adjust(10)
        yield* settle
      }
      yield* TestClock.adjust(heartbeatMs)
      yield* settle
      expect((yield* jobNow(job.id)).progress).toBe(80)
      yield* Deferred.succeed(release, undefined)
      yield* joinMoving(run)
      expect((yield* jobNow(job.id)).progress).toBe(100)
    }).pipe(
      Effect.provide(
        memoryEngineStack({
          timing: { jobHeartbeatInterval: Duration.millis(heartbeatMs), jobLockTtl: Duration.millis(60_000) }
        })
      )
    ))

  it.scoped("a progress report that is not a number is ignored; the next one counts", () =>
    Effect.gen(function*() {
      const reported = yield* Deferred.make<void>()
      const answer = yield* Deferred.make<void>()
      const gateway = Layer.succeed(AiGateway, {
        generate: (request) =>
          Effect.gen(function*() {
            yield* reportProgress(Number.NaN)
            yield* reportProgress(50)
            yield* Deferred.succeed(reported, undefined)
            yield* Deferred.await(answer)
            return {
              text: "",
              json: { echo: "numbers" },
              usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 },
              provider: request.provider,
              model: request.model,
              latencyMs: 1,
              finishReason: "stop"
            }
          })
      })
      yield* Effect.gen(function*() {
        const engine = yield* makeExecutionEngine("worker-nan")
        const job = yield* createEcho("numbers")
        const run = yield* Effect.fork(engine.run(deliveryOf(job)))
        for (let step = 0; step < 100 && !(yield* Deferred.isDone(reported)); step++) {
          yield* TestClock.adjust(10)
          yield* settle
        }
        yield* TestClock.adjust(heartbeatMs)
        yield* settle
        expect((yield* jobNow(job.id)).progress).toBe(50)
        yield* Deferred.succeed(answer, undefined)
        yield* joinMoving(run)
        expect((yield* jobNow(job.id)).lifecycleStatus).toBe("succeeded")
      }).pipe(
        Effect.provide(
          memoryEngineStack({
            gateway,
            timing: { jobHeartbeatInterval: Duration.millis(heartbeatMs), jobLockTtl: Duration.millis(60_000) }
          })
        )
      )
    }))

  it.scoped("a defect in a run is logged and the delivery acknowledged: the reaper covers the job", () =>
    Effect.gen(function*() {
      const engine = yield* makeExecutionEngine("worker-defect").pipe(
        Effect.updateService(
          AiJobLifecycleRepository,
          (jobs) => ({ ...jobs, lockQueued: () => Effect.die(new Error("bug in the lock")) })
        )
      )
      const job = yield* createEcho("defective")
      const exit = yield* Effect.exit(engine.run(deliveryOf(job, undefined, null)))
      expect(Exit.isSuccess(exit)).toBe(true)
      const logged = (yield* (yield* LogCapture).lines).filter((line) =>
        line.includes("engine defect; the reaper covers the job")
      )
      expect(logged).toHaveLength(1)
      expect(yield* engine.runningJobIds).toStrictEqual([])
    }).pipe(Effect.provide(LogCaptureLayer), Effect.provide(memoryEngineStack())))

  it.scoped("a validation failure is retried with its problems in the next prompt", () => {
    const { gateway, prompts } = promptRecordingGateway((call) =>
      Effect.succeed(call === 1 ? { echo: "something else" } : { echo: "exact words" })
    )
    return Effect.gen(function*() {
      const engine = yield* makeExecutionEngine("worker-problems")
      const job = yield* createEcho("exact words")
      yield* joinMoving(yield* Effect.fork(engine.run(deliveryOf(job))))
      expect((yield* jobNow(job.id)).lifecycleStatus).toBe("succeeded")
      expect(prompts).toHaveLength(2)
      expect(prompts[0]).not.toContain("echo must repeat the message exactly")
      expect(prompts[0]).not.toContain("Your previous answer was rejected")
      expect(prompts[1]).toContain("echo must repeat the message exactly")
    }).pipe(Effect.provide(memoryEngineStack({ gateway })))
  })

  it.scoped("a provider failure retried adds no problems to the next prompt: only a validation failure does", () => {
    const { gateway, prompts } = promptRecordingGateway((call) =>
      call === 1
        ? Effect.fail(new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: "503 from provider" }))
        : Effect.succeed({ echo: "steady" })
    )
    return Effect.gen(function*() {
      const engine = yield* makeExecutionEngine("worker-unavailable")
      const job = yield* createEcho("steady")
      yield* joinMoving(yield* Effect.fork(engine.run(deliveryOf(job))))
      expect((yield* jobNow(job.id)).lifecycleStatus).toBe("succeeded")
      expect(prompts).toHaveLength(2)
      expect(prompts[1]).toBe(prompts[0])
    }).pipe(Effect.provide(memoryEngineStack({ gateway })))
  })

  it.scoped("a finished run leaves no listener on its delivery's abort signal", () =>
    Effect.gen(function*() {
      const engine = yield* makeExecutionEngine("worker-listeners")
      const job = yield* createEcho("no leftovers")
      const controller = new AbortController()
      yield* joinMoving(yield* Effect.fork(engine.run(deliveryOf(job, controller.signal))))
      expect((yield* jobNow(job.id)).lifecycleStatus).toBe("succeeded")
      expect(getEventListeners(controller.signal, "abort")).toStrictEqual([])
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a lease lost during the call ends the run as lost at PROJECT: nothing written, the new owner's row untouched", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      const jobs = yield* AiJobLifecycleRepository
      yield* control.script([{ _tag: "Delay", duration: Duration.millis(1_000) }])
      const engine = yield* makeExecutionEngine("worker-zombie")
      const job = yield* createEcho("zombie")
      const run = yield* Effect.fork(engine.run(deliveryOf(job)))
      yield* TestClock.adjust(10)
      yield* settle
      const running = yield* jobNow(job.id)
      expect(running.lockedBy).toBe("worker-zombie")
      yield* jobs.releaseLock({ jobId: job.id, workerId: "worker-zombie", leaseNo: running.leaseNo, attempt: 1 })
      const rescued = yield* jobs.takeOver(job.id, "rescuer", Duration.millis(60_000))
      yield* joinMoving(run)
      expect(yield* jobNow(job.id)).toStrictEqual(rescued)
      expect(yield* Effect.flatMap(ArtifactRepository, (artifacts) => artifacts.listByJob(job.id))).toStrictEqual([])
      const lines = yield* Effect.flatMap(LogCapture, (capture) => capture.lines)
      const lost = lines.filter((line) => line.includes("lock lost: another worker owns the job"))
      expect(lost).toHaveLength(1)
      expect(lost[0]).toContain("attempt=1")
      expect(lost[0]).toContain("workerId=worker-zombie")
      expect(lines.filter((line) => line.includes("failure not recorded"))).toStrictEqual([])
    }).pipe(
      Effect.provide(LogCaptureLayer),
      Effect.provide(
        memoryEngineStack({
          timing: { jobLockTtl: Duration.millis(60_000), jobHeartbeatInterval: Duration.millis(30_000) }
        })
      )
    ))

  it.scoped("a beat just after PROJECT's commit leaves the run a success: COMPLETE announces it, counts it and logs it", () =>
    Effect.gen(function*() {
      const committed = yield* Deferred.make<void>()
      const resume = yield* Deferred.make<void>()
      // PROJECT's commit (the run's one transaction) lands, then the work waits before it hears of it.
      const engine = yield* makeExecutionEngine("worker-late-beat").pipe(
        Effect.updateService(UnitOfWork, (unitOfWork) => ({
          transaction: (effect) =>
            unitOfWork.transaction(effect).pipe(
              Effect.tap(() => Effect.zipRight(Deferred.succeed(committed, undefined), Deferred.await(resume)))
            )
        }))
      )
      const job = yield* createEcho("late beat")
      const events = yield* Effect.flatMap(JobEvents, (jobEvents) => jobEvents.subscribe(job.id))
      const run = yield* Effect.fork(engine.run(deliveryOf(job)))
      for (let step = 0; step < 1_000 && !(yield* Deferred.isDone(committed)); step++) {
        yield* TestClock.adjust(10)
        yield* settle
      }
      expect((yield* jobNow(job.id)).lifecycleStatus).toBe("succeeded")
      // The keeper's next beat finds the row no longer running before the work reports its success.
      yield* TestClock.adjust(heartbeatMs)
      yield* settle
      yield* Deferred.succeed(resume, undefined)
      expect(Exit.isSuccess(yield* Fiber.await(run))).toBe(true)
      const heard = Chunk.toReadonlyArray(yield* Queue.takeAll(events)).map((event) => event.lifecycleStatus)
      expect(heard.at(-1)).toBe("succeeded")
      const lines = yield* (yield* LogCapture).lines
      expect(lines.filter((line) => line.includes("job finished") && line.includes("outcome=succeeded"))).toHaveLength(
        1
      )
      expect(lines.filter((line) => line.includes("lock lost"))).toStrictEqual([])
    }).pipe(
      Effect.provide(LogCaptureLayer),
      Effect.provide(memoryEngineStack({ timing: { jobHeartbeatInterval: Duration.millis(heartbeatMs) } }))
    ))
})
