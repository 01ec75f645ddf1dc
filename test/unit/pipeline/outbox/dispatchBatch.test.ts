import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, HashMap, Layer, Metric, Option, Scope, TestClock } from "effect"
import { DispatcherSettings } from "../../../../src/config/DispatcherSettings.js"
import { TimingConfig } from "../../../../src/config/EngineConfig.js"
import { QueueSettings } from "../../../../src/config/QueueSettings.js"
import { newId } from "../../../../src/domain/Ids.js"
import { enqueueEventType } from "../../../../src/domain/OutboxEvent.js"
import { PersistenceError } from "../../../../src/domain/PersistenceError.js"
import { storedParent } from "../../../../src/domain/TraceContext.js"
import { MemoryDatabase } from "../../../../src/layers/memory/MemoryDatabase.js"
import { MemoryJobQueueControl, MemoryJobQueueLive } from "../../../../src/layers/memory/MemoryJobQueue.js"
import { makeDispatcher } from "../../../../src/pipeline/outbox/dispatcher.js"
import { AiJobService } from "../../../../src/services/AiJobService.js"
import { dispatchedEvents, dispatchLatency, tagged } from "../../../../src/services/EngineMetrics.js"
import { JobQueue, JobQueueUnavailable, queueJobIdFor } from "../../../../src/services/JobQueue.js"
import { OutboxRepository } from "../../../../src/services/outbox/OutboxRepository.js"
import { UnitOfWork } from "../../../../src/services/UnitOfWork.js"
import { jobCreation, memoryRepositories } from "../../../support/foundationStack.js"
import { LogCapture, LogCaptureLayer } from "../../../support/logCapture.js"
import { recordingSpans } from "../../../support/recordingSpans.js"

/** The embedded stack: memory repositories, job creation, the memory queue, all on TestClock. */
const stack = (settings: Partial<DispatcherSettings["Type"]> = {}, timing: Partial<TimingConfig["Type"]> = {}) =>
  DispatcherSettings.make({ dispatcherId: "dispatcher-a", retryBaseDelay: Duration.seconds(1), ...settings }).pipe(
    Layer.provideMerge(
      Layer.mergeAll(MemoryJobQueueLive.pipe(Layer.provide(QueueSettings.make())), TimingConfig.make(timing))
    ),
    Layer.provideMerge(jobCreation(memoryRepositories)),
    Layer.provideMerge(LogCaptureLayer),
    Layer.orDie
  )

const createJob = (message = "hello") =>
  Effect.flatMap(
    AiJobService,
    (service) =>
      service.createJob({
        userId: "user-1",
        jobType: "synthetic_echo",
        targetType: "deck",
        targetId: message,
        input: { message }
      })
  ).pipe(Effect.map((created) => created.job))

/** An outbox event written on its own (no create, so no wake-up signal). */
const writeEvent = (eventType: string, payload: unknown) =>
  Effect.gen(function*() {
    const outbox = yield* OutboxRepository
    const id = yield* newId
    yield* Effect.flatMap(UnitOfWork, (unitOfWork) =>
      unitOfWork.transaction(
        outbox.createInTransaction({
          id,
          eventType,
          aggregateType: "AiJob",
          aggregateId: `job-${id}`,
          dedupeKey: `${eventType}:${id}`,
          payload,
          delay: Duration.zero
        })
      ))
    return id
  })

const statusOf = (eventId: string) =>
  Effect.flatMap(
    OutboxRepository,
    (outbox) => Effect.map(outbox.findById(eventId), (event) => Option.getOrThrow(event).status)
  )

const eventsOf = Effect.gen(function*() {
  const db = yield* MemoryDatabase
  return [...HashMap.values((yield* db.snapshot).outboxEvent)]
})

const queuedIds = Effect.flatMap(MemoryJobQueueControl, (control) => control.jobIds("ai-interactive"))

const logLines = (text: string) =>
  Effect.map(
    Effect.flatMap(LogCapture, (capture) => capture.lines),
    (lines) => lines.filter((line) => line.includes(text))
  )

const settle = Effect.gen(function*() {
  for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
})

const nothing = { published: 0, retry_scheduled: 0, dead: 0, unknown_type: 0, claim_lost: 0 }

/** A dispatcher whose publish write marks only the first event of a batch (the others' claims expired under it). */
const halfPublishing = makeDispatcher.pipe(
  Effect.updateService(OutboxRepository, (outbox) => ({
    ...outbox,
    markPublishedMany: (ids, dispatcherId) => outbox.markPublishedMany(ids.slice(0, 1), dispatcherId)
  }))
)

describe("one dispatch batch (memory, TestClock)", () => {
  it.scoped("counts what each claimed event came to, and the published ones in the metrics", () =>
    Effect.gen(function*() {
      const dispatcher = yield* makeDispatcher
      const job = yield* createJob("good")
      yield* writeEvent("ai.job.completed", { jobId: "x" })
      const broken = yield* writeEvent(enqueueEventType, { jobId: "y" })
      const published = Metric.value(dispatchedEvents)
      const latency = Metric.value(tagged(dispatchLatency, {}))
      const before = { published: (yield* published).count, latency: yield* latency }
      yield* TestClock.adjust(3_000)
      const summary = yield* dispatcher.dispatchBatch
      expect(summary).toStrictEqual({ claimed: 3, outcomes: { ...nothing, published: 1, unknown_type: 1, dead: 1 } })
      expect(yield* queuedIds).toStrictEqual([queueJobIdFor(job.id)])
      expect(yield* statusOf(broken)).toBe("dead")
      const brokenEvent = yield* Effect.flatMap(
        OutboxRepository,
        (outbox) => Effect.map(outbox.findById(broken), Option.getOrThrow)
      )
      expect(brokenEvent.lastError).toBe("payload does not decode as { jobId, jobType, queueName, priority }")
      expect(yield* logLines("Outbox enqueue payload does not decode; event marked dead")).toHaveLength(1)
      // Two marked published (the job's and the unknown type's), each three seconds after its commit.
      expect((yield* published).count - before.published).toBe(2)
      const after = yield* latency
      expect([after.count - before.latency.count, after.sum - before.latency.sum]).toStrictEqual([2, 6])
      expect(yield* dispatcher.dispatchBatch).toStrictEqual({ claimed: 0, outcomes: nothing })
      expect((yield* published).count - before.published).toBe(2)
    }).pipe(Effect.provide(stack())))

  it.scoped("a queue that refuses schedules a retry, dead at maxAttempts", () =>
    Effect.gen(function*() {
      const control = yield* MemoryJobQueueControl
      const dispatcher = yield* makeDispatcher
      yield* control.setUnreachable(true)
      yield* createJob("refused")
      expect((yield* dispatcher.dispatchBatch).outcomes).toStrictEqual({ ...nothing, retry_scheduled: 1 })
      yield* TestClock.adjust(10_000)
      expect((yield* dispatcher.dispatchBatch).outcomes).toStrictEqual({ ...nothing, dead: 1 })
      const warned = yield* logLines("Queue add failed")
      expect(warned).toHaveLength(2)
      expect(warned[0]).toContain("outcome=retry_scheduled")
      expect(warned[0]).toContain("attempt=1")
      expect(warned[1]).toContain("outcome=dead")
    }).pipe(Effect.provide(stack({ maxAttempts: 2 }))))

  it.scoped("an add whose outcome is unknown is published if the queue holds the job, asked addChecks times 200 ms apart", () =>
    Effect.gen(function*() {
      const queue = yield* JobQueue
      let asked: Array<number> = []
      let lands = true
      const unanswered = Effect.updateService(JobQueue, (jobQueue) => ({
        ...jobQueue,
        add: (request) =>
          Effect.zipRight(
            lands ? jobQueue.add(request) : Effect.void,
            Effect.fail(new JobQueueUnavailable({ operation: "add", message: "timed out", outcomeUnknown: true }))
          ),
        contains: (queueName, queueJobId) =>
          Effect.flatMap(TestClock.currentTimeMillis, (now) => {
            asked.push(now)
            return asked.length < 3
              ? Effect.fail(new JobQueueUnavailable({ operation: "contains", message: "no answer" }))
              : jobQueue.contains(queueName, queueJobId)
          })
      }))
      const dispatcher = yield* makeDispatcher.pipe(unanswered)
      const landed = yield* createJob("landed")
      const first = yield* Effect.fork(dispatcher.dispatchBatch)
      for (let i = 0; i < 10; i++) yield* TestClock.adjust(100)
      expect((yield* first.await).pipe(Exit.map((summary) => summary.outcomes))).toStrictEqual(
        Exit.succeed({ ...nothing, published: 1 })
      )
      expect(asked.map((at) => at - asked[0]!)).toStrictEqual([0, 200, 400])
      expect(yield* queue.contains("ai-interactive", queueJobIdFor(landed.id))).toBe(true)
      expect(yield* logLines("Queue add went unanswered but the job is on the queue; published")).toHaveLength(1)

      // It never landed, and the queue stops answering: a failure like any other.
      asked = []
      lands = false
      const lost = yield* createJob("lost")
      const second = yield* Effect.fork(dispatcher.dispatchBatch)
      for (let i = 0; i < 10; i++) yield* TestClock.adjust(100)
      expect((yield* second.await).pipe(Exit.map((summary) => summary.outcomes))).toStrictEqual(
        Exit.succeed({ ...nothing, retry_scheduled: 1 })
      )
      expect(asked).toHaveLength(3)
      expect(yield* queue.contains("ai-interactive", queueJobIdFor(lost.id))).toBe(false)
    }).pipe(Effect.provide(stack({ addChecks: 3 }))))

  it.scoped("a claim that fails is logged and claims nothing; a publish write that fails counts the batch's events as claim_lost", () =>
    Effect.gen(function*() {
      const failingClaim = yield* makeDispatcher.pipe(
        Effect.updateService(OutboxRepository, (outbox) => ({
          ...outbox,
          claimBatch: () => Effect.fail(new PersistenceError({ operation: "outbox_event.claim", message: "db down" }))
        }))
      )
      const job = yield* createJob("kept")
      expect(yield* failingClaim.dispatchBatch).toStrictEqual({ claimed: 0, outcomes: nothing })
      expect(yield* logLines("Claiming outbox events failed")).toHaveLength(1)

      const failingPublish = yield* makeDispatcher.pipe(
        Effect.updateService(OutboxRepository, (outbox) => ({
          ...outbox,
          markPublishedMany: () =>
            Effect.fail(new PersistenceError({ operation: "outbox_event.publish", message: "db down" }))
        }))
      )
      expect(yield* failingPublish.dispatchBatch).toStrictEqual({ claimed: 1, outcomes: { ...nothing, claim_lost: 1 } })
      expect(yield* logLines("Marking a batch published failed")).toHaveLength(1)
      // On the queue all the same: the claim expires and the event is queued again, a no-op.
      expect(yield* queuedIds).toStrictEqual([queueJobIdFor(job.id)])
      expect((yield* eventsOf).map((event) => event.status)).toStrictEqual(["processing"])

      const halfPublished = yield* halfPublishing
      yield* createJob("one")
      yield* createJob("two")
      expect(yield* halfPublished.dispatchBatch).toStrictEqual({
        claimed: 2,
        outcomes: { ...nothing, published: 1, claim_lost: 1 }
      })
    }).pipe(Effect.provide(stack())))
})

describe("a failed add whose failure cannot be recorded (memory, TestClock)", () => {
  it.scoped("the claim was lost meanwhile, or the store failed: claim_lost, the event left for its claim to expire", () =>
    Effect.gen(function*() {
      const control = yield* MemoryJobQueueControl
      yield* control.setUnreachable(true)
      const claimLost = yield* makeDispatcher.pipe(
        Effect.updateService(
          OutboxRepository,
          (outbox) => ({ ...outbox, markDispatchFailed: () => Effect.succeed(Option.none()) })
        )
      )
      yield* createJob("claim lost")
      expect((yield* claimLost.dispatchBatch).outcomes).toStrictEqual({ ...nothing, claim_lost: 1 })
      yield* TestClock.adjust(60_000)
      const storeDown = yield* makeDispatcher.pipe(
        Effect.updateService(OutboxRepository, (outbox) => ({
          ...outbox,
          markDispatchFailed: () =>
            Effect.fail(new PersistenceError({ operation: "outbox_event.fail", message: "db down" }))
        }))
      )
      yield* Effect.flatMap(OutboxRepository, (outbox) => outbox.releaseExpiredLocks(Duration.millis(0)))
      expect((yield* storeDown.dispatchBatch).outcomes).toStrictEqual({ ...nothing, claim_lost: 1 })
      expect(yield* logLines("Dispatching an outbox event failed; its claim will expire")).toHaveLength(1)
      expect((yield* eventsOf).map((event) => event.status)).toStrictEqual(["processing"])
    }).pipe(Effect.provide(stack())))
})

describe("the dispatcher's loops (memory, TestClock)", () => {
  it.scoped("drains in batches until one comes back short, then waits for a signal or the poll", () =>
    Effect.gen(function*() {
      const dispatcher = yield* makeDispatcher
      const ids = yield* Effect.forEach([1, 2, 3, 4, 5], (n) => writeEvent("ai.job.other", { n }))
      yield* dispatcher.drain
      for (const id of ids) expect(yield* statusOf(id)).toBe("published")

      yield* Effect.forkScoped(dispatcher.run)
      yield* settle
      // Written without a signal: the poll (1 s) finds it.
      const quiet = yield* writeEvent("ai.job.other", { n: 6 })
      yield* TestClock.adjust(999)
      expect(yield* statusOf(quiet)).toBe("pending")
      yield* TestClock.adjust(1)
      yield* settle
      expect(yield* statusOf(quiet)).toBe("published")
    }).pipe(Effect.provide(stack({ batchSize: 2 }))))

  it.scoped("releases expired claims every min(releaseInterval, half the claim TTL) and dispatches them at once", () =>
    Effect.gen(function*() {
      const outbox = yield* OutboxRepository
      const dispatcher = yield* makeDispatcher
      const job = yield* createJob("abandoned")
      yield* outbox.claimBatch("dispatcher-that-died", 10)
      yield* Effect.forkScoped(dispatcher.run)
      // Claim TTL 10 s, swept every 4 s (the interval is shorter than half the TTL): free at the sweep at 12 s.
      yield* TestClock.adjust(11_999)
      yield* settle
      expect((yield* eventsOf)[0]!.status).toBe("processing")
      yield* TestClock.adjust(1)
      yield* settle
      expect((yield* eventsOf)[0]!.status).toBe("published")
      expect(yield* queuedIds).toStrictEqual([queueJobIdFor(job.id)])
      const released = yield* logLines("Released expired outbox claims")
      expect(released).toHaveLength(1)
      expect(released[0]).toContain("released=1")
    }).pipe(
      Effect.provide(
        stack({ releaseInterval: Duration.seconds(4) }, {
          outboxLockTtl: Duration.millis(10_000),
          outboxPollInterval: Duration.millis(600_000)
        })
      )
    ))

  it.scoped("stopping gives this dispatcher's unfinished claims back at once", () =>
    Effect.gen(function*() {
      const outbox = yield* OutboxRepository
      const dispatcher = yield* makeDispatcher
      yield* createJob("cut short")
      // Claimed under this dispatcher's id by a batch that never finished.
      yield* outbox.claimBatch("dispatcher-a", 10)
      const scope = yield* Scope.make()
      yield* dispatcher.run.pipe(Scope.extend(scope))
      yield* settle
      expect((yield* eventsOf)[0]!.status).toBe("processing")
      yield* Scope.close(scope, Exit.void)
      expect((yield* eventsOf)[0]!.status).toBe("pending")
      const released = yield* logLines("Released this dispatcher's unfinished claims")
      expect(released).toHaveLength(1)
      expect(released[0]).toContain("released=1")
      expect(yield* logLines("Outbox dispatcher stopped")).toHaveLength(1)
      const [started] = yield* logLines("Outbox dispatcher started")
      expect(started).toContain("dispatcherId=dispatcher-a")
      expect(started).toContain("batchSize=100")
      expect(started).toContain("pollMs=600000")
    }).pipe(Effect.provide(stack({}, { outboxPollInterval: Duration.millis(600_000) }))))

  it.scoped("the retry delay grows from the base and stays at the cap", () =>
    Effect.gen(function*() {
      const control = yield* MemoryJobQueueControl
      const dispatcher = yield* makeDispatcher
      yield* control.setUnreachable(true)
      yield* createJob("delayed")
      yield* dispatcher.dispatchBatch
      const [event] = yield* eventsOf
      const delay = event!.availableAt.getTime() - event!.updatedAt.getTime()
      expect(delay).toBeGreaterThanOrEqual(Duration.toMillis(Duration.seconds(8)))
      expect(delay).toBeLessThanOrEqual(Duration.toMillis(Duration.seconds(12)))
      // The second failure waits about twice as long, the third four times.
      for (const [low, high] of [[16_000, 24_000], [32_000, 48_000]]) {
        yield* TestClock.adjust(60_000)
        yield* dispatcher.dispatchBatch
        const [later] = yield* eventsOf
        const next = later!.availableAt.getTime() - later!.updatedAt.getTime()
        expect(next).toBeGreaterThanOrEqual(low!)
        expect(next).toBeLessThanOrEqual(high!)
      }
    }).pipe(
      Effect.provide(
        stack({ retryBaseDelay: Duration.seconds(10), retryMaxDelay: Duration.minutes(1), maxAttempts: 5 })
      )
    ))
})

describe("what the dispatcher tells about each event and its loops (memory, TestClock)", () => {
  it.scoped("a queue that never answers whether an unanswered add landed is asked addChecks times; the failure counts and names the event", () =>
    Effect.gen(function*() {
      let asked = 0
      const dispatcher = yield* makeDispatcher.pipe(
        Effect.updateService(JobQueue, (jobQueue) => ({
          ...jobQueue,
          add: () =>
            Effect.fail(new JobQueueUnavailable({ operation: "add", message: "timed out", outcomeUnknown: true })),
          contains: () =>
            Effect.suspend(() => {
              asked += 1
              return Effect.fail(new JobQueueUnavailable({ operation: "contains", message: "no answer" }))
            })
        }))
      )
      const job = yield* createJob("never answered")
      const [event] = yield* eventsOf
      const batch = yield* Effect.fork(dispatcher.dispatchBatch)
      for (let i = 0; i < 20; i++) yield* TestClock.adjust(100)
      expect((yield* batch.await).pipe(Exit.map((summary) => summary.outcomes))).toStrictEqual(
        Exit.succeed({ ...nothing, retry_scheduled: 1 })
      )
      expect(asked).toBe(3)
      expect(yield* queuedIds).toStrictEqual([])
      const [warning] = yield* logLines("Queue add failed")
      for (
        const part of [
          `eventId=${event!.id}`,
          "eventType=ai.job.enqueue",
          `aggregateId=${job.id}`,
          "dispatcherId=dispatcher-a",
          "error=timed out"
        ]
      ) {
        expect(warning).toContain(part)
      }
    }).pipe(Effect.provide(stack({ addChecks: 3 }))))

  it.scoped("a failed claim or publish write is logged with the dispatcher and the error", () =>
    Effect.gen(function*() {
      const down = (operation: string) => Effect.fail(new PersistenceError({ operation, message: "db down" }))
      const failingClaim = yield* makeDispatcher.pipe(
        Effect.updateService(
          OutboxRepository,
          (outbox) => ({ ...outbox, claimBatch: () => down("outbox_event.claim") })
        )
      )
      yield* createJob("kept")
      yield* failingClaim.dispatchBatch
      const failingPublish = yield* makeDispatcher.pipe(
        Effect.updateService(
          OutboxRepository,
          (outbox) => ({ ...outbox, markPublishedMany: () => down("outbox_event.publish") })
        )
      )
      yield* failingPublish.dispatchBatch
      for (const text of ["Claiming outbox events failed", "Marking a batch published failed"]) {
        const [line] = yield* logLines(text)
        expect(line, text).toContain("dispatcherId=dispatcher-a")
        expect(line, text).toContain("error=db down")
      }
    }).pipe(Effect.provide(stack())))

  it.scoped("a batch's adds run concurrently, up to dispatchConcurrency", () =>
    Effect.gen(function*() {
      const dispatcher = yield* makeDispatcher.pipe(
        Effect.updateService(JobQueue, (jobQueue) => ({
          ...jobQueue,
          add: (request) => Effect.zipRight(Effect.sleep(Duration.seconds(1)), jobQueue.add(request))
        }))
      )
      yield* Effect.forEach(["one", "two", "three"], createJob)
      const batch = yield* Effect.fork(dispatcher.dispatchBatch)
      yield* TestClock.adjust(1_000)
      yield* settle
      // One second for the three together; one after the other they would take three.
      expect(Option.map(yield* batch.poll, Exit.map((summary) => summary.outcomes))).toStrictEqual(
        Option.some(Exit.succeed({ ...nothing, published: 3 }))
      )
    }).pipe(Effect.provide(stack({ dispatchConcurrency: 3 }))))

  it.scoped("commit → published is observed for the events this batch did publish, as their age", () =>
    Effect.gen(function*() {
      yield* TestClock.adjust(50_000)
      const halfPublished = yield* halfPublishing
      yield* createJob("one")
      yield* createJob("two")
      const latency = Metric.value(tagged(dispatchLatency, {}))
      const before = yield* latency
      yield* TestClock.adjust(2_000)
      expect((yield* halfPublished.dispatchBatch).outcomes).toStrictEqual({ ...nothing, published: 1, claim_lost: 1 })
      const after = yield* latency
      expect([after.count - before.count, after.sum - before.sum]).toStrictEqual([1, 2])
    }).pipe(Effect.provide(stack())))

  it.scoped("with a claim TTL shorter than twice the release interval, claims are swept every half TTL; a failed sweep is logged and the next goes on", () =>
    Effect.gen(function*() {
      const outbox = yield* OutboxRepository
      let sweeps = 0
      const dispatcher = yield* makeDispatcher.pipe(
        Effect.updateService(OutboxRepository, (repository) => ({
          ...repository,
          releaseExpiredLocks: (ttl) =>
            Effect.suspend(() => {
              sweeps += 1
              return sweeps === 2
                ? Effect.fail(new PersistenceError({ operation: "outbox_event.release", message: "db down" }))
                : repository.releaseExpiredLocks(ttl)
            })
        }))
      )
      const job = yield* createJob("abandoned")
      yield* outbox.claimBatch("dispatcher-that-died", 10)
      yield* Effect.forkScoped(dispatcher.run)
      // TTL 2 s: a sweep at start and every second (not every 60 s); the one at 1 s fails.
      for (let i = 0; i < 3; i++) {
        yield* TestClock.adjust(1_000)
        yield* settle
      }
      expect(sweeps).toBe(4)
      expect((yield* eventsOf)[0]!.status).toBe("published")
      expect(yield* queuedIds).toStrictEqual([queueJobIdFor(job.id)])
      const [failed] = yield* logLines("Releasing expired outbox claims failed")
      expect(failed).toContain("error=db down")
    }).pipe(
      Effect.provide(
        stack({ releaseInterval: Duration.minutes(1) }, {
          outboxLockTtl: Duration.millis(2_000),
          outboxPollInterval: Duration.millis(600_000)
        })
      )
    ))

  it.scoped("stopping with no claims left says nothing of them; a failed give-back is logged and the stop still completes", () =>
    Effect.gen(function*() {
      const quiet = yield* makeDispatcher
      const quietScope = yield* Scope.make()
      yield* quiet.run.pipe(Scope.extend(quietScope))
      yield* settle
      yield* Scope.close(quietScope, Exit.void)
      expect(yield* logLines("unfinished claims")).toStrictEqual([])
      const [stopped] = yield* logLines("Outbox dispatcher stopped")
      expect(stopped).toContain("dispatcherId=dispatcher-a")

      const failing = yield* makeDispatcher.pipe(
        Effect.updateService(OutboxRepository, (outbox) => ({
          ...outbox,
          releaseClaimsOf: () =>
            Effect.fail(new PersistenceError({ operation: "outbox_event.release", message: "db down" }))
        }))
      )
      const scope = yield* Scope.make()
      yield* failing.run.pipe(Scope.extend(scope))
      yield* settle
      yield* Scope.close(scope, Exit.void)
      const [warning] = yield* logLines("Releasing this dispatcher's claims failed; they expire with the claim TTL")
      expect(warning).toContain("error=db down")
      expect(yield* logLines("Outbox dispatcher stopped")).toHaveLength(2)
    }).pipe(Effect.provide(stack({}, { outboxPollInterval: Duration.millis(600_000) }))))

  it.scoped("only publishes are traced, each in the job's trace or a root of its own; the polls around them are not", () =>
    Effect.gen(function*() {
      // A store that traces its statements, as the SQL client does.
      const traced = Effect.updateService(OutboxRepository, (outbox) => ({
        ...outbox,
        claimBatch: (dispatcherId, limit) =>
          outbox.claimBatch(dispatcherId, limit).pipe(Effect.withSpan("store.claim")),
        releaseExpiredLocks: (ttl) => outbox.releaseExpiredLocks(ttl).pipe(Effect.withSpan("store.release"))
      }))
      const looped = yield* recordingSpans(
        Effect.gen(function*() {
          const dispatcher = yield* makeDispatcher.pipe(traced)
          yield* Effect.forkScoped(dispatcher.run)
          for (let i = 0; i < 3; i++) {
            yield* TestClock.adjust(1_000)
            yield* settle
          }
          // The loop, woken by the create, publishes the job as a child of its create's span.
          const job = yield* createJob("traced")
          yield* settle
          expect(yield* queuedIds).toStrictEqual([queueJobIdFor(job.id)])
          return job
        })
      )
      const job = looped.result
      expect(looped.seen.filter((span) => span.name.startsWith("store."))).toStrictEqual([])
      expect(looped.seen.filter((span) => span.name === "dispatcher.publish").map((span) => span.parentSpanId))
        .toStrictEqual([
          Option.getOrThrow(storedParent(job.traceParent)).spanId
        ])

      // An event with no stored trace context, dispatched by a batch run inside some span: its
      // publish is a root of its own, not a child of what ran the batch.
      const inside = yield* recordingSpans(
        Effect.gen(function*() {
          const dispatcher = yield* makeDispatcher.pipe(traced)
          yield* writeEvent(enqueueEventType, {
            jobId: "job-untraced",
            jobType: "synthetic_echo",
            queueName: "ai-interactive",
            priority: 50
          })
          expect((yield* dispatcher.dispatchBatch.pipe(Effect.withSpan("outer"))).outcomes).toStrictEqual({
            ...nothing,
            published: 1
          })
        })
      )
      const outer = inside.seen.find((span) => span.name === "outer")!
      expect(inside.seen.find((span) => span.name === "store.claim")?.parentSpanId).toBe(outer.spanId)
      expect(inside.seen.filter((span) => span.name === "dispatcher.publish").map((span) => span.parentSpanId))
        .toStrictEqual([undefined])
    }).pipe(Effect.provide(stack({}, { outboxPollInterval: Duration.millis(1_000) }))))
})
