import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Scope, TestClock } from "effect"
import { type AiJob, leaseOf } from "../../../src/domain/AiJob.js"
import { CredentialError, ProviderError } from "../../../src/domain/ExecutionError.js"
import { defineJobType } from "../../../src/domain/JobType.js"
import { jobCatalog } from "../../../src/jobs/catalog.js"
import {
  syntheticEcho,
  syntheticEchoDefinition,
  SyntheticEchoInput
} from "../../../src/jobs/synthetic_echo/definition.js"
import { syntheticEchoJobType } from "../../../src/jobs/synthetic_echo/index.js"
import { SyntheticEchoOutput } from "../../../src/jobs/synthetic_echo/output.js"
import { SyntheticGatewayControl } from "../../../src/layers/gateway/SyntheticGateway.js"
import { makeExecutionEngine } from "../../../src/pipeline/engine.js"
import { execute } from "../../../src/pipeline/execute.js"
import { makeDispatcher } from "../../../src/pipeline/outbox/dispatcher.js"
import { prepare } from "../../../src/pipeline/prepare.js"
import { project } from "../../../src/pipeline/project.js"
import { reapOnce } from "../../../src/pipeline/reaper.js"
import { resolve } from "../../../src/pipeline/resolve.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { ArtifactRepository } from "../../../src/services/ArtifactRepository.js"
import { CancelSignal } from "../../../src/services/CancelSignal.js"
import { JobQueue, payloadFor } from "../../../src/services/JobQueue.js"
import { OutboxRepository } from "../../../src/services/outbox/OutboxRepository.js"
import { definePromptTemplate } from "../../../src/services/PromptTemplates.js"
import { UsageLog } from "../../../src/services/UsageLog.js"
import { awaitStatus, memoryEngineStack, recordsOf, settle, startEngine } from "../../support/engineStack.js"

const createEcho = (message = "hello", jobType = "synthetic_echo") =>
  Effect.flatMap(
    AiJobService,
    (service) => service.createJob({ userId: "user-1", jobType, targetType: "test", targetId: "t", input: { message } })
  ).pipe(
    Effect.map(({ job }) => job)
  )

const unavailable = new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: "503 from provider" })

describe("the execution engine (memory layers, TestClock)", () => {
  it.scoped("runs each job type to succeeded with its business rows, artifacts, progress 100 and one usage row", () =>
    Effect.gen(function*() {
      yield* startEngine()
      const service = yield* AiJobService
      const usage = yield* UsageLog
      const artifacts = yield* ArtifactRepository
      const inputs = [
        { jobType: "synthetic_echo", input: { message: "echo me" } },
        {
          jobType: "flashcard_generation",
          input: {
            sourceText: "Photosynthesis turns light into chemical energy. Chlorophyll absorbs light.",
            count: 2,
            deckId: "deck-9"
          }
        },
        {
          jobType: "feynman_evaluation",
          input: { concept: "entropy", explanation: "Entropy measures disorder, for example a messy room." }
        },
        {
          jobType: "learning_analysis",
          input: {
            evaluations: [{ evaluationId: "e-1", concept: "entropy", score: 45, gaps: ["no concrete example"] }]
          }
        }
      ]
      for (const { input, jobType } of inputs) {
        const { job } = yield* service.createJob({
          userId: "user-1",
          jobType,
          targetType: "test",
          targetId: "t",
          input
        })
        const done = yield* awaitStatus(job.id, ["succeeded", "failed", "cancelled"])
        expect(done.lifecycleStatus, `${jobType}: ${done.internalErrorMessage}`).toBe("succeeded")
        expect(done.status).toBe("completed")
        expect(done.progress).toBe(100)
        expect(done.outputHash).toMatch(/^[0-9a-f]{64}$/)
        const rows = yield* usage.listByJobId(job.id)
        expect(rows.map((row) => [row.attemptNo, row.errorCode])).toStrictEqual([[1, null]])
        expect(rows[0]!.totalTokens).toBeGreaterThan(0)
        const records = yield* recordsOf(job.id)
        const stored = yield* artifacts.listByJob(job.id)
        expect(stored.map((artifact) => artifact.artifactId)).toStrictEqual(records.map((record) => record["id"]))
        if (jobType === "synthetic_echo") {
          expect(records).toStrictEqual([{ id: stored[0]!.artifactId, echo: "echo me" }])
        }
        if (jobType === "flashcard_generation") {
          expect(records.length).toBeGreaterThanOrEqual(1)
          expect(records.length).toBeLessThanOrEqual(2)
          expect(records[0]).toMatchObject({ deckId: "deck-9", ordinal: 0 })
        }
        if (jobType === "feynman_evaluation") expect(records[0]).toMatchObject({ concept: "entropy" })
        if (jobType === "learning_analysis") {
          expect(records[0]).toMatchObject({ evaluationIds: ["e-1"], gaps: ["no concrete example"] })
        }
      }
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("retries a provider that fails twice, with backoff, then succeeds: usage rows 1, 2, 3", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      yield* control.script([{ _tag: "Fail", error: unavailable }, { _tag: "Fail", error: unavailable }])
      yield* startEngine()
      const job = yield* createEcho()
      const done = yield* awaitStatus(job.id, ["succeeded", "failed"])
      expect(done.lifecycleStatus).toBe("succeeded")
      const rows = yield* Effect.flatMap(UsageLog, (usage) => usage.listByJobId(job.id))
      expect(rows.map((row) => [row.attemptNo, row.errorCode])).toStrictEqual([
        [1, "PROVIDER_UNAVAILABLE"],
        [2, "PROVIDER_UNAVAILABLE"],
        [3, null]
      ])
      // Exponential from 1 s, jittered (x0.8 .. x1.2): ~1 s, then ~2 s.
      const firstGap = rows[1]!.createdAt.getTime() - rows[0]!.createdAt.getTime()
      const secondGap = rows[2]!.createdAt.getTime() - rows[1]!.createdAt.getTime()
      expect(firstGap).toBeGreaterThanOrEqual(800)
      expect(firstGap).toBeLessThanOrEqual(1_300)
      expect(secondGap).toBeGreaterThanOrEqual(1_600)
      expect(secondGap).toBeLessThanOrEqual(2_500)
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("gives up after maxRetries and records a public message without internals", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      yield* control.script([
        {
          _tag: "Fail",
          error: new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: "503 from 10.0.0.7:443 /v1/chat" })
        },
        { _tag: "Fail", error: unavailable },
        { _tag: "Fail", error: unavailable }
      ])
      yield* startEngine()
      const job = yield* createEcho()
      const done = yield* awaitStatus(job.id, ["succeeded", "failed"])
      expect(done.lifecycleStatus).toBe("failed")
      expect(done.errorCode).toBe("PROVIDER_UNAVAILABLE")
      expect(done.publicErrorMessage).not.toMatch(/10\.0\.0\.7|\/v1|at .*\(/)
      expect(done.internalErrorMessage).toContain("3 provider call(s)")
      expect((yield* control.calls).filter((call) => call.jobId === job.id)).toHaveLength(3)
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("never retries a credential error", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      yield* control.script([{
        _tag: "Fail",
        error: new CredentialError({ code: "CREDENTIAL_INVALID", message: "401" })
      }])
      yield* startEngine()
      const job = yield* createEcho()
      const done = yield* awaitStatus(job.id, ["succeeded", "failed"])
      expect(done.errorCode).toBe("CREDENTIAL_INVALID")
      expect((yield* control.calls).filter((call) => call.jobId === job.id)).toHaveLength(1)
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("retries a validation failure with the problems in the prompt", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      yield* control.script([{ _tag: "Respond", json: { echo: "not what was asked" } }])
      yield* startEngine()
      const job = yield* createEcho("exact words")
      const done = yield* awaitStatus(job.id, ["succeeded", "failed"])
      expect(done.lifecycleStatus).toBe("succeeded")
      expect(yield* recordsOf(job.id)).toMatchObject([{ echo: "exact words" }])
      expect((yield* control.calls).filter((call) => call.jobId === job.id)).toHaveLength(2)
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a timeout with abortStrategy retry aborts the call and tries again", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      yield* control.script([{ _tag: "Hang" }])
      yield* startEngine()
      const job = yield* createEcho()
      const done = yield* awaitStatus(job.id, ["succeeded", "failed"], { stepMs: 500 })
      expect(done.lifecycleStatus).toBe("succeeded")
      const calls = (yield* control.calls).filter((call) => call.jobId === job.id)
      expect(calls.map((call) => call.outcome)).toStrictEqual(["interrupted", "succeeded"])
      const rows = yield* Effect.flatMap(UsageLog, (usage) => usage.listByJobId(job.id))
      expect(rows.map((row) => row.errorCode)).toStrictEqual(["TIMEOUT", null])
    }).pipe(
      Effect.provide(
        memoryEngineStack({
          timing: { jobLockTtl: Duration.millis(120_000), jobHeartbeatInterval: Duration.millis(20_000) }
        })
      )
    ))

  const strictEcho = {
    ...syntheticEchoJobType,
    spec: defineJobType({
      definition: {
        ...syntheticEchoDefinition,
        jobType: "strict_echo",
        execution: { ...syntheticEchoDefinition.execution, abortStrategy: "fail", timeoutMs: 5_000 }
      },
      input: SyntheticEchoInput,
      output: SyntheticEchoOutput
    }),
    prompts: [
      definePromptTemplate({
        jobType: "strict_echo",
        version: "v1",
        input: SyntheticEchoInput,
        render: ({ input }) => [{ role: "user", content: JSON.stringify({ echo: input.message }) }]
      })
    ]
  }

  const steadyEcho = {
    ...syntheticEchoJobType,
    spec: defineJobType({
      definition: {
        ...syntheticEchoDefinition,
        jobType: "steady_echo",
        execution: { ...syntheticEchoDefinition.execution, cancellable: false, timeoutMs: 300_000 }
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

  it.scoped("a timeout with abortStrategy fail aborts the call and fails the job", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      yield* control.script([{ _tag: "Hang" }])
      yield* startEngine()
      const job = yield* createEcho("x", "strict_echo")
      const done = yield* awaitStatus(job.id, ["succeeded", "failed"], { stepMs: 500 })
      expect(done.lifecycleStatus).toBe("failed")
      expect(done.errorCode).toBe("TIMEOUT")
      expect((yield* control.calls).map((call) => call.outcome)).toStrictEqual(["interrupted"])
    }).pipe(Effect.provide(memoryEngineStack({ modules: [...jobCatalog, strictEcho] }))))

  it.scoped("a cancelled queued job never runs", () =>
    Effect.gen(function*() {
      const jobs = yield* AiJobLifecycleRepository
      const job = yield* createEcho()
      yield* jobs.requestCancel(job.id)
      yield* startEngine()
      yield* TestClock.adjust(5_000)
      yield* settle
      const control = yield* SyntheticGatewayControl
      expect(yield* control.calls).toHaveLength(0)
      expect(Option.getOrThrow(yield* jobs.findById(job.id)).lifecycleStatus).toBe("cancelled")
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a running job whose cancel message was missed is cancelled at the next heartbeat", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      const jobs = yield* AiJobLifecycleRepository
      yield* control.script([{ _tag: "Hang" }])
      yield* startEngine()
      const job = yield* createEcho()
      yield* awaitStatus(job.id, ["running"], { stepMs: 10 })
      yield* TestClock.adjust(100)
      yield* settle
      // Locked (the lock writes PREPARE's 5); later stages wait for the heartbeat to carry them.
      expect(Option.getOrThrow(yield* jobs.findById(job.id)).progress).toBe(5)
      // Recorded in the database only: no message is published.
      yield* jobs.requestCancel(job.id)
      yield* TestClock.adjust(29_000)
      yield* settle
      expect(Option.getOrThrow(yield* jobs.findById(job.id)).lifecycleStatus).toBe("running")
      yield* TestClock.adjust(1_500)
      yield* settle
      const cancelled = Option.getOrThrow(yield* jobs.findById(job.id))
      expect(cancelled.lifecycleStatus).toBe("cancelled")
      // The heartbeat that saw the cancel also reported that the provider call had begun.
      expect(cancelled.progress).toBe(20)
      expect((yield* control.calls).map((call) => call.outcome)).toStrictEqual(["interrupted"])
      expect(yield* Effect.flatMap(ArtifactRepository, (artifacts) => artifacts.listByJob(job.id))).toHaveLength(0)
    }).pipe(
      Effect.provide(
        memoryEngineStack({
          timing: { jobLockTtl: Duration.millis(60_000), jobHeartbeatInterval: Duration.millis(30_000) }
        })
      )
    ))

  it.scoped("a published cancel stops a running job at once", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      const jobs = yield* AiJobLifecycleRepository
      const cancels = yield* CancelSignal
      yield* control.script([{ _tag: "Hang" }])
      yield* startEngine()
      const job = yield* createEcho()
      yield* awaitStatus(job.id, ["running"], { stepMs: 10 })
      yield* TestClock.adjust(100)
      yield* settle
      yield* jobs.requestCancel(job.id)
      yield* cancels.publish(job.id)
      yield* settle
      expect(Option.getOrThrow(yield* jobs.findById(job.id)).lifecycleStatus).toBe("cancelled")
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a cancel request on a job type that cannot be cancelled is ignored: the heartbeat goes on", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      const jobs = yield* AiJobLifecycleRepository
      yield* control.script([{ _tag: "Delay", duration: Duration.millis(200_000) }])
      yield* startEngine()
      const job = yield* createEcho("x", "steady_echo")
      yield* awaitStatus(job.id, ["running"], { stepMs: 10 })
      yield* jobs.requestCancel(job.id)
      // Three heartbeats past the request, and past the first lock's end.
      for (let i = 0; i < 12; i++) {
        yield* TestClock.adjust(10_000)
        yield* settle
      }
      const running = Option.getOrThrow(yield* jobs.findById(job.id))
      expect(running.lifecycleStatus).toBe("running")
      expect(running.lockUntil!.getTime()).toBeGreaterThan(running.lockedAt!.getTime() + 60_000)
      const done = yield* awaitStatus(job.id, ["succeeded", "failed", "cancelled"], { stepMs: 1_000 })
      expect(done.lifecycleStatus).toBe("succeeded")
    }).pipe(Effect.provide(memoryEngineStack({ modules: [...jobCatalog, steadyEcho] }))))

  it.scoped("a cancel that arrives during PROJECT leaves the job succeeded with its artifacts, never a mix", () =>
    Effect.gen(function*() {
      const jobs = yield* AiJobLifecycleRepository
      const cancels = yield* CancelSignal
      const inProject = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const artifacts = yield* ArtifactRepository
      // Artifacts that pause inside the PROJECT transaction, after the business rows.
      const pausingArtifacts = Layer.succeed(ArtifactRepository, {
        ...artifacts,
        record: (jobId, refs) =>
          Effect.zipRight(
            Effect.zipRight(Deferred.succeed(inProject, undefined), Deferred.await(release)),
            artifacts.record(jobId, refs)
          )
      })
      const job = yield* createEcho()
      yield* Effect.forkScoped(startEngine().pipe(Effect.provide(pausingArtifacts)))
      yield* Effect.forkScoped(Effect.forever(Effect.zipRight(TestClock.adjust(10), Effect.yieldNow())))
      yield* Deferred.await(inProject)
      // The cancel request waits on the job's row (the PROJECT transaction holds it, as InnoDB
      // would); its message reaches the worker at once.
      const request = yield* Effect.fork(Effect.either(jobs.requestCancel(job.id)))
      yield* cancels.publish(job.id)
      yield* settle
      yield* Deferred.succeed(release, undefined)
      const answered = yield* Fiber.join(request)
      expect(answered._tag === "Left" && answered.left._tag).toBe("JobNotCancellable")
      const done = yield* awaitStatus(job.id, ["succeeded", "cancelled"])
      const stored = yield* artifacts.listByJob(job.id)
      expect({ status: done.lifecycleStatus, artifacts: stored.length }).toStrictEqual({
        status: "succeeded",
        artifacts: 1
      })
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a cancel requested before PROJECT wins over the provider's answer: nothing projected, the job cancelled", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      const jobs = yield* AiJobLifecycleRepository
      yield* control.script([{ _tag: "Delay", duration: Duration.millis(1_000) }])
      yield* startEngine()
      const job = yield* createEcho()
      yield* awaitStatus(job.id, ["running"], { stepMs: 10 })
      // Requested during the call, its message not delivered (a frozen worker wakes to both at
      // once): neither the heartbeat (30 s) nor the message stops the run before PROJECT.
      yield* jobs.requestCancel(job.id)
      yield* TestClock.adjust(2_000)
      yield* settle
      const done = yield* awaitStatus(job.id, ["succeeded", "failed", "cancelled"], { stepMs: 10 })
      expect([done.lifecycleStatus, done.errorCode, done.outputHash]).toStrictEqual(["cancelled", "CANCELLED", null])
      expect(yield* Effect.flatMap(ArtifactRepository, (artifacts) => artifacts.listByJob(job.id))).toHaveLength(0)
      expect(yield* recordsOf(job.id)).toHaveLength(0)
      // The call happened: its usage row is written on its own, once.
      const rows = yield* Effect.flatMap(UsageLog, (usage) => usage.listByJobId(job.id))
      expect(rows.map((row) => [row.attemptNo, row.errorCode])).toStrictEqual([[1, null]])
    }).pipe(
      Effect.provide(
        memoryEngineStack({
          timing: { jobLockTtl: Duration.millis(60_000), jobHeartbeatInterval: Duration.millis(30_000) }
        })
      )
    ))

  it.scoped("the same delivery handled twice at once produces one execution", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      const job = yield* createEcho()
      const engine = yield* makeExecutionEngine("worker-dup")
      const delivery = {
        queueName: "ai-interactive" as const,
        queueJobId: "aijob-dup",
        payload: payloadFor({ jobId: job.id, jobType: job.jobType, createdAt: job.createdAt }),
        attempt: 1,
        maxAttempts: 2,
        signal: new AbortController().signal
      }
      const both = yield* Effect.fork(Effect.all([engine.run(delivery), engine.run(delivery)], { concurrency: 2 }))
      yield* awaitStatus(job.id, ["succeeded"])
      yield* Fiber.join(both)
      expect((yield* control.calls).filter((call) => call.jobId === job.id)).toHaveLength(1)
      expect(yield* Effect.flatMap(ArtifactRepository, (repo) => repo.listByJob(job.id))).toHaveLength(1)
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a worker paused past its lock (a zombie) cannot commit its projection", () =>
    Effect.gen(function*() {
      const jobs = yield* AiJobLifecycleRepository
      const job = yield* createEcho("zombie")
      const payload = payloadFor({ jobId: job.id, jobType: job.jobType, createdAt: job.createdAt })
      // The zombie gets as far as a validated output...
      const prepared = Option.getOrThrow(yield* prepare(payload, "zombie", Duration.millis(60_000)))
      const executed = yield* execute(yield* resolve(prepared), 1, [])
      // ...then sleeps past its lock while another worker takes the job over.
      yield* TestClock.adjust(61_000)
      const taken = yield* jobs.takeOver(job.id, "rescuer", Duration.millis(60_000))
      expect(leaseOf(taken)?.workerId).toBe("rescuer")
      const late = yield* Effect.either(project(executed))
      expect(late._tag === "Left" && late.left._tag).toBe("LockLost")
      expect(yield* Effect.flatMap(ArtifactRepository, (repo) => repo.listByJob(job.id))).toHaveLength(0)
      expect(yield* recordsOf(job.id)).toHaveLength(0)
      expect(Option.getOrThrow(yield* jobs.findById(job.id)).lifecycleStatus).toBe("running")
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("the reaper re-queues a job whose worker vanished, and another worker finishes it once", () =>
    Effect.gen(function*() {
      const jobs = yield* AiJobLifecycleRepository
      const job = yield* createEcho("orphan")
      // A worker locked it and died (no heartbeat, no result).
      yield* jobs.lockJob(job.id, "dead-worker", Duration.millis(60_000))
      yield* startEngine("rescuer")
      yield* TestClock.adjust(60_000 + 30_001)
      const pass = yield* reapOnce
      expect(pass.requeued).toBe(1)
      const done = yield* awaitStatus(job.id, ["succeeded", "failed"])
      expect(done.lifecycleStatus).toBe("succeeded")
      expect(done.lockedBy).toBe("rescuer")
      expect(done.attemptCount).toBe(2)
      expect(yield* Effect.flatMap(ArtifactRepository, (repo) => repo.listByJob(job.id))).toHaveLength(1)
      // A second pass finds nothing to do.
      expect((yield* reapOnce).requeued).toBe(0)
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a queued job whose delivery was lost is queued again by the reaper and runs", () =>
    Effect.gen(function*() {
      const outbox = yield* OutboxRepository
      const job = yield* createEcho("lost delivery")
      // The event was published but the queue lost the delivery.
      const [event] = yield* outbox.claimBatch("careless-dispatcher", 10)
      expect(event?.aggregateId).toBe(job.id)
      yield* outbox.markPublishedMany([event!.id], "careless-dispatcher")
      yield* startEngine()
      yield* TestClock.adjust(60_000)
      yield* settle
      expect(
        Option.getOrThrow(yield* Effect.flatMap(AiJobLifecycleRepository, (repo) => repo.findById(job.id)))
          .lifecycleStatus
      )
        .toBe("queued")
      yield* TestClock.adjust(300_000)
      const pass = yield* reapOnce
      expect(pass.requeuedQueued).toBe(1)
      const done = yield* awaitStatus(job.id, ["succeeded", "failed"])
      expect(done.lifecycleStatus).toBe("succeeded")
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a queued job merely waiting in the queue (a backlog) is never queued again by the reaper", () =>
    Effect.gen(function*() {
      const outbox = yield* OutboxRepository
      const job = yield* createEcho("waiting in a backlog")
      // Published, but no worker consumes yet: the queue job waits.
      const dispatcher = yield* makeDispatcher
      yield* Effect.forkScoped(dispatcher.run)
      yield* settle
      yield* TestClock.adjust(1_000)
      yield* settle
      expect((yield* (yield* JobQueue).counts("ai-interactive")).waiting).toBe(1)
      // Well past the requeue age (two leases), several reaper passes.
      for (let pass = 0; pass < 4; pass++) {
        yield* TestClock.adjust(40_000)
        expect((yield* reapOnce).requeuedQueued).toBe(0)
      }
      // One event: the create's; the reaper added none.
      expect(yield* outbox.countByStatus).toMatchObject({ published: 1, pending: 0, processing: 0 })
      // A worker arrives: the one delivery runs it.
      yield* startEngine()
      const done = yield* awaitStatus(job.id, ["succeeded", "failed"])
      expect(done.lifecycleStatus).toBe("succeeded")
      expect(yield* outbox.countByStatus).toMatchObject({ published: 1 })
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a delivery taken by a worker that died before PREPARE is queued again within two leases", () =>
    Effect.gen(function*() {
      const queue = yield* JobQueue
      const job = yield* createEcho("taken, never prepared")
      // A consumer that takes the delivery and never gets to PREPARE (killed right after).
      const taken = yield* Deferred.make<void>()
      const gone = yield* Deferred.make<void>()
      yield* queue.consume(
        "ai-interactive",
        () => Effect.zipRight(Deferred.succeed(taken, undefined), Deferred.await(gone)),
        {
          concurrency: 1
        }
      )
      const dispatcher = yield* makeDispatcher
      yield* Effect.forkScoped(dispatcher.run)
      for (let step = 0; step < 100 && !(yield* Deferred.isDone(taken)); step++) {
        yield* TestClock.adjust(100)
        yield* settle
      }
      expect(yield* Deferred.isDone(taken)).toBe(true)
      yield* startEngine("rescuer")
      // Still within a lease of the take: the delivery may yet be prepared; nothing happens.
      yield* TestClock.adjust(10_000)
      expect((yield* reapOnce).requeuedQueued).toBe(0)
      // Two leases (30 s) after it was queued, its queue job active for more than a lease: queued again.
      yield* TestClock.adjust(21_000)
      expect((yield* reapOnce).requeuedQueued).toBe(1)
      const done = yield* awaitStatus(job.id, ["succeeded", "failed"])
      expect(done.lifecycleStatus).toBe("succeeded")
      expect(done.lockedBy).toBe("rescuer")
      expect(done.attemptCount).toBe(1)
      yield* Deferred.succeed(gone, undefined)
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("the reaper fails a lost job with no attempts left, and cancels one whose cancel was requested", () =>
    Effect.gen(function*() {
      const jobs = yield* AiJobLifecycleRepository
      const exhausted = yield* createEcho("a")
      yield* jobs.lockJob(exhausted.id, "w1", Duration.millis(1_000))
      yield* TestClock.adjust(2_000)
      yield* jobs.takeOver(exhausted.id, "w2", Duration.millis(1_000))
      const cancelled = yield* createEcho("b")
      yield* jobs.lockJob(cancelled.id, "w3", Duration.millis(1_000))
      yield* jobs.requestCancel(cancelled.id)
      yield* TestClock.adjust(40_000)
      const pass = yield* reapOnce
      expect(pass).toMatchObject({ failed: 1, cancelled: 1 })
      const lost = Option.getOrThrow(yield* jobs.findById(exhausted.id))
      expect(lost.errorCode).toBe("INTERNAL_WORKER_LOST")
      expect(Option.getOrThrow(yield* jobs.findById(cancelled.id)).lifecycleStatus).toBe("cancelled")
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a stopping worker hands its running job back; another worker takes it over at once", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      const jobs = yield* AiJobLifecycleRepository
      yield* control.script([{ _tag: "Hang" }])
      const workerScope = yield* Scope.make()
      yield* startEngine("leaving").pipe(Scope.extend(workerScope))
      const job = yield* createEcho()
      yield* awaitStatus(job.id, ["running"], { stepMs: 10 })
      yield* TestClock.adjust(100)
      yield* settle
      yield* Scope.close(workerScope, Exit.void).pipe(Effect.fork)
      for (let i = 0; i < 10; i++) {
        yield* settle
        yield* TestClock.adjust(1)
      }
      const handedBack = Option.getOrThrow(yield* jobs.findById(job.id))
      expect(handedBack.lifecycleStatus).toBe("running")
      expect(handedBack.lockUntil).toBeNull()
      yield* startEngine("staying")
      const done = yield* awaitStatus(job.id, ["succeeded", "failed"], { stepMs: 250 })
      expect(done.lifecycleStatus).toBe("succeeded")
      expect(done.lockedBy).toBe("staying")
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a job handed off more times than it has attempts still succeeds, in its first attempt", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      const jobs = yield* AiJobLifecycleRepository
      const handOffs = 4
      // Every worker but the last is stopped while its provider call hangs.
      yield* control.script(Array.from({ length: handOffs }, () => ({ _tag: "Hang" as const })))
      const job = yield* createEcho("handed around")
      expect(job.maxAttempts).toBeLessThan(handOffs)
      /** Moves time on (the reaper queues a handed-off job again once the queue gave up) until `done`. */
      const until = (done: (current: AiJob) => boolean) =>
        Effect.gen(function*() {
          for (let step = 0; step < 2_000; step++) {
            const current = Option.getOrThrow(yield* jobs.findById(job.id))
            if (done(current)) return current
            yield* TestClock.adjust(50)
            yield* settle
            if (step % 20 === 19) yield* reapOnce
          }
          return yield* Effect.dieMessage(`job ${job.id} never reached the expected state`)
        })
      for (let handOff = 0; handOff < handOffs; handOff++) {
        const workerScope = yield* Scope.make()
        yield* startEngine(`worker-${handOff}`).pipe(Scope.extend(workerScope))
        // Running under this worker, its provider call under way.
        yield* until((current) => current.lockedBy === `worker-${handOff}` && current.progress > 0)
        yield* Scope.close(workerScope, Exit.void)
        const handedBack = Option.getOrThrow(yield* jobs.findById(job.id))
        expect(handedBack.lifecycleStatus).toBe("running")
        expect(handedBack.lockedBy).toBeNull()
        expect(handedBack.attemptCount).toBe(1)
      }
      yield* startEngine("worker-last")
      const done = yield* until((current) =>
        current.lifecycleStatus !== "running" && current.lifecycleStatus !== "queued"
      )
      expect(done.lifecycleStatus).toBe("succeeded")
      expect(done.lockedBy).toBe("worker-last")
      expect(done.attemptCount).toBe(1)
      expect(yield* Effect.flatMap(ArtifactRepository, (repo) => repo.listByJob(job.id))).toHaveLength(1)
      // One usage row per call: the interrupted calls of the workers that left, then the answer.
      const rows = yield* Effect.flatMap(UsageLog, (usage) => usage.listByJobId(job.id))
      expect(rows.map((row) => row.errorCode)).toStrictEqual([
        ...Array.from({ length: handOffs }, () => "CANCELLED"),
        null
      ])
      expect(new Set(rows.map((row) => `${row.leaseNo}/${row.attemptNo}`)).size).toBe(rows.length)
    }).pipe(Effect.provide(memoryEngineStack({ timing: { jobHeartbeatInterval: Duration.millis(200) } }))))

  it.scoped("the registry refuses to start with a broken job type", () =>
    Effect.gen(function*() {
      const broken = {
        ...syntheticEchoJobType,
        spec: { ...syntheticEcho, definition: { ...syntheticEchoDefinition, projector: "missing" } }
      }
      const exit = yield* Effect.exit(Layer.build(memoryEngineStack({ modules: [broken] })))
      expect(exit._tag).toBe("Failure")
    }))
})
