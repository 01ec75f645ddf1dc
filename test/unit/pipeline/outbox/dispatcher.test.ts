import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, HashMap, Layer, Logger, Option, Ref, TestClock } from "effect"
import { DispatcherSettings } from "../../../../src/config/DispatcherSettings.js"
import { TimingConfig } from "../../../../src/config/EngineConfig.js"
import { QueueSettings } from "../../../../src/config/QueueSettings.js"
import { newId } from "../../../../src/domain/Ids.js"
import { enqueueEventType } from "../../../../src/domain/OutboxEvent.js"
import { MemoryDatabase } from "../../../../src/layers/memory/MemoryDatabase.js"
import { MemoryJobQueueControl, MemoryJobQueueLive } from "../../../../src/layers/memory/MemoryJobQueue.js"
import { makeDispatcher, retryDelay } from "../../../../src/pipeline/outbox/dispatcher.js"
import { AiJobLifecycleRepository } from "../../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../../src/services/AiJobService.js"
import { JobQueue, queueJobIdFor } from "../../../../src/services/JobQueue.js"
import { OutboxAdmin } from "../../../../src/services/outbox/OutboxAdmin.js"
import { OutboxRepository } from "../../../../src/services/outbox/OutboxRepository.js"
import { UnitOfWork } from "../../../../src/services/UnitOfWork.js"
import { jobCreation, memoryRepositories } from "../../../support/foundationStack.js"

/** The embedded stack: memory repositories, job creation, the memory queue, all on TestClock. */
const stack = (settings: Partial<DispatcherSettings["Type"]> = {}, timing: Partial<TimingConfig["Type"]> = {}) =>
  Layer.mergeAll(
    OutboxAdmin.Default,
    DispatcherSettings.make({ dispatcherId: "dispatcher-a", retryBaseDelay: Duration.seconds(1), ...settings })
  ).pipe(
    Layer.provideMerge(
      Layer.mergeAll(MemoryJobQueueLive.pipe(Layer.provide(QueueSettings.make())), TimingConfig.make(timing))
    ),
    Layer.provideMerge(jobCreation(memoryRepositories)),
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
        targetId: "deck-1",
        input: { message }
      })
  ).pipe(Effect.map((created) => created.job))

const eventOf = (jobId: string) =>
  Effect.gen(function*() {
    const db = yield* MemoryDatabase
    const tables = yield* db.snapshot
    const events = [...HashMap.values(tables.outboxEvent)].filter((event) => event.aggregateId === jobId)
    expect(events).toHaveLength(1)
    return events[0]!
  })

const queuedIds = Effect.flatMap(MemoryJobQueueControl, (control) => control.jobIds("ai-interactive"))

/** Lets forked fibers run, advancing the TestClock in small steps, until `done` holds. */
const eventually = <A, E, R>(check: Effect.Effect<A, E, R>, done: (a: A) => boolean, stepMs = 10) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1_000; i++) {
      const value = yield* check
      if (done(value)) return value
      yield* TestClock.adjust(Duration.millis(stepMs))
    }
    return yield* Effect.dieMessage("condition never held")
  })

const startDispatcher = Effect.flatMap(makeDispatcher, (dispatcher) => dispatcher.run)

/** Captures log lines (level and message) so a test can see a warning was written. */
const captureLogs = Effect.gen(function*() {
  const lines = yield* Ref.make<ReadonlyArray<{ readonly level: string; readonly message: string }>>([])
  const logger = Logger.make(({ logLevel, message }) => {
    const text = Array.isArray(message) ? message.map(String).join(" ") : String(message)
    Effect.runSync(Ref.update(lines, (all) => [...all, { level: logLevel.label, message: text }]))
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
})

describe("OutboxDispatcher (memory, TestClock)", () => {
  it.scoped("a created job reaches the queue at once, woken by the signal, and its event is published", () =>
    Effect.gen(function*() {
      yield* startDispatcher
      const job = yield* createJob()
      // No clock movement needed: the create's signal wakes the dispatcher, not the poll.
      const published = yield* eventually(eventOf(job.id), (event) => event.status === "published", 0)
      expect(published.attemptCount).toBe(0)
      expect(yield* queuedIds).toEqual([queueJobIdFor(job.id)])
      expect((yield* (yield* JobQueue).counts("ai-interactive")).waiting).toBe(1)
    }).pipe(Effect.provide(stack())))

  it.scoped("an event written in a transaction that rolls back is never dispatched", () =>
    Effect.gen(function*() {
      yield* startDispatcher
      const unitOfWork = yield* UnitOfWork
      const outbox = yield* OutboxRepository
      const jobId = yield* newId
      const rolledBack = yield* unitOfWork.transaction(
        Effect.gen(function*() {
          yield* outbox.createInTransaction({
            id: yield* newId,
            eventType: enqueueEventType,
            aggregateType: "AiJob",
            aggregateId: jobId,
            dedupeKey: `${enqueueEventType}:${jobId}`,
            payload: { jobId, jobType: "synthetic_echo", queueName: "ai-interactive", priority: 50 },
            delay: Duration.zero
          })
          return yield* Effect.fail("business rule refused" as const)
        })
      ).pipe(Effect.flip)
      expect(rolledBack).toBe("business rule refused")
      yield* TestClock.adjust(Duration.minutes(5))
      expect(yield* outbox.countByStatus).toEqual({ pending: 0, processing: 0, published: 0, failed: 0, dead: 0 })
      expect(yield* queuedIds).toEqual([])
    }).pipe(Effect.provide(stack())))

  it.scoped("a dispatcher that died after its claim: the event is dispatched again after the lock TTL, queued once", () =>
    Effect.gen(function*() {
      const outbox = yield* OutboxRepository
      // Created with no dispatcher running, then claimed by one that dies before its add.
      const job = yield* createJob()
      const claimed = yield* outbox.claimBatch("dispatcher-that-died", 10)
      expect(claimed.map((event) => event.aggregateId)).toEqual([job.id])

      yield* startDispatcher
      yield* TestClock.adjust(Duration.seconds(59))
      expect((yield* eventOf(job.id)).status).toBe("processing")
      expect(yield* queuedIds).toEqual([])

      // TTL 60 s, released by the 30 s sweep at 90 s.
      yield* TestClock.adjust(Duration.seconds(32))
      const event = yield* eventually(eventOf(job.id), (e) => e.status === "published")
      expect(event.lockedBy).toBe("dispatcher-a")
      expect(yield* queuedIds).toEqual([queueJobIdFor(job.id)])
      expect((yield* (yield* JobQueue).counts("ai-interactive")).waiting).toBe(1)
    }).pipe(Effect.provide(stack({}, { outboxLockTtl: Duration.millis(60_000) }))))

  it.scoped("with the default (lease-derived) claim TTL, a dead dispatcher's claim is dispatched again within two leases", () =>
    Effect.gen(function*() {
      const outbox = yield* OutboxRepository
      const job = yield* createJob()
      yield* outbox.claimBatch("dispatcher-that-died", 10)
      yield* startDispatcher
      // Default lease 15 s: the claim lasts 15 s and is swept every 7.5 s, so it is back before 30 s.
      yield* TestClock.adjust(Duration.seconds(14))
      expect((yield* eventOf(job.id)).status).toBe("processing")
      yield* TestClock.adjust(Duration.seconds(15))
      const event = yield* eventually(eventOf(job.id), (e) => e.status === "published")
      expect(event.lockedBy).toBe("dispatcher-a")
      expect(yield* queuedIds).toEqual([queueJobIdFor(job.id)])
    }).pipe(Effect.provide(stack())))

  it.scoped("queue unreachable: attempts accumulate, nothing is lost, and the event is delivered once it answers", () =>
    Effect.gen(function*() {
      const control = yield* MemoryJobQueueControl
      yield* control.setUnreachable(true)
      yield* startDispatcher
      const job = yield* createJob()
      const retrying = yield* eventually(eventOf(job.id), (e) => e.attemptCount === 1)
      expect(retrying.status).toBe("pending")
      expect(retrying.lastError).toContain("JobQueueUnavailable")
      expect(retrying.availableAt.getTime()).toBeGreaterThan(retrying.updatedAt.getTime())

      yield* control.setUnreachable(false)
      const delivered = yield* eventually(eventOf(job.id), (e) => e.status === "published", 100)
      expect(delivered.attemptCount).toBe(1)
      expect(yield* queuedIds).toEqual([queueJobIdFor(job.id)])
    }).pipe(Effect.provide(stack())))

  it.scoped("queue unreachable: dead at the third failure, visible in the counts, and a replay delivers it", () =>
    Effect.gen(function*() {
      const control = yield* MemoryJobQueueControl
      const admin = yield* OutboxAdmin
      yield* control.setUnreachable(true)
      yield* startDispatcher
      const job = yield* createJob()
      const dead = yield* eventually(eventOf(job.id), (e) => e.status === "dead", 250)
      expect(dead.attemptCount).toBe(3)
      expect(yield* admin.counts).toMatchObject({ dead: 1, pending: 0, processing: 0, published: 0 })
      // Dead means dead: the dispatcher leaves it alone even once the queue is back.
      yield* control.setUnreachable(false)
      yield* TestClock.adjust(Duration.minutes(10))
      expect((yield* eventOf(job.id)).status).toBe("dead")
      expect(yield* queuedIds).toEqual([])

      const replayed = yield* admin.replayDead(dead.id)
      expect(replayed.status).toBe("pending")
      expect(replayed.attemptCount).toBe(0)
      const delivered = yield* eventually(eventOf(job.id), (e) => e.status === "published", 0)
      expect(delivered.attemptCount).toBe(0)
      expect(yield* queuedIds).toEqual([queueJobIdFor(job.id)])
      expect(yield* admin.counts).toMatchObject({ dead: 0, published: 1 })
    }).pipe(Effect.provide(stack())))

  it.scoped("an unknown event_type is marked published with a warning and nothing is queued", () =>
    Effect.gen(function*() {
      const logs = yield* captureLogs
      const unitOfWork = yield* UnitOfWork
      const outbox = yield* OutboxRepository
      const eventId = yield* newId
      yield* unitOfWork.transaction(
        outbox.createInTransaction({
          id: eventId,
          eventType: "ai.job.completed",
          aggregateType: "AiJob",
          aggregateId: "job-x",
          dedupeKey: `ai.job.completed:job-x`,
          payload: { jobId: "job-x" },
          delay: Duration.zero
        })
      )
      yield* startDispatcher.pipe(Effect.provide(logs.layer))
      const event = yield* eventually(
        Effect.map(outbox.findById(eventId), Option.getOrThrow),
        (e) => e.status === "published"
      )
      expect(event.attemptCount).toBe(0)
      expect(yield* queuedIds).toEqual([])
      expect((yield* (yield* JobQueue).counts("ai-background")).waiting).toBe(0)
      const warnings = (yield* Ref.get(logs.lines)).filter((line) => line.level === "WARN")
      expect(warnings.map((line) => line.message)).toContain(
        "Unknown outbox event type; marked published, nothing queued"
      )
    }).pipe(Effect.provide(stack())))

  it.scoped("an enqueue event whose payload does not decode is dead at once, never queued", () =>
    Effect.gen(function*() {
      const unitOfWork = yield* UnitOfWork
      const outbox = yield* OutboxRepository
      const eventId = yield* newId
      yield* unitOfWork.transaction(
        outbox.createInTransaction({
          id: eventId,
          eventType: enqueueEventType,
          aggregateType: "AiJob",
          aggregateId: "job-y",
          dedupeKey: `${enqueueEventType}:job-y`,
          payload: { jobId: "job-y", queueName: "no-such-queue" },
          delay: Duration.zero
        })
      )
      yield* startDispatcher
      const event = yield* eventually(
        Effect.map(outbox.findById(eventId), Option.getOrThrow),
        (e) => e.status === "dead"
      )
      expect(event.attemptCount).toBe(1)
      expect(yield* queuedIds).toEqual([])
    }).pipe(Effect.provide(stack())))

  it.scoped("a queue payload that does not decode is rejected, the worker carries on, the job row is left for the reaper", () =>
    Effect.gen(function*() {
      const control = yield* MemoryJobQueueControl
      const jobQueue = yield* JobQueue
      const jobs = yield* AiJobLifecycleRepository
      const outbox = yield* OutboxRepository
      const poisoned = yield* createJob("poisoned")
      // Its event was dispatched earlier; what reached the queue got corrupted on the way.
      const [event] = yield* outbox.claimBatch("earlier-dispatcher", 10)
      expect(yield* outbox.markPublishedMany([event!.id], "earlier-dispatcher")).toBe(1)
      const handled = yield* Ref.make<ReadonlyArray<string>>([])
      yield* control.addRaw("ai-interactive", queueJobIdFor(poisoned.id), { jobId: poisoned.id, createdAt: "never" })
      yield* jobQueue.consume(
        "ai-interactive",
        (delivery) => Ref.update(handled, (all) => [...all, delivery.payload.jobId])
      )

      yield* startDispatcher
      const healthy = yield* createJob("healthy")
      yield* eventually(Ref.get(handled), (all) => all.includes(healthy.id))
      expect(yield* Ref.get(handled)).toEqual([healthy.id])
      const row = Option.getOrThrow(yield* jobs.findById(poisoned.id))
      expect(row.lifecycleStatus).toBe("queued")
      expect(row.attemptCount).toBe(0)
    }).pipe(Effect.provide(stack())))

  it.effect("the retry delay follows the exponential, jittered, capped Schedule", () =>
    Effect.gen(function*() {
      const settings = { retryBaseDelay: Duration.seconds(1), retryMaxDelay: Duration.seconds(5) }
      const first = Duration.toMillis(yield* retryDelay(settings, 1))
      const second = Duration.toMillis(yield* retryDelay(settings, 2))
      const fifth = Duration.toMillis(yield* retryDelay(settings, 5))
      expect(first).toBeGreaterThanOrEqual(800)
      expect(first).toBeLessThanOrEqual(1_200)
      expect(second).toBeGreaterThanOrEqual(1_600)
      expect(second).toBeLessThanOrEqual(2_400)
      expect(fifth).toBe(5_000)
    }))
})
