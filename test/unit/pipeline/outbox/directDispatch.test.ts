import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, HashMap, Layer, TestClock } from "effect"
import { DirectDispatchSettings } from "../../../../src/config/DirectDispatchSettings.js"
import { DispatcherSettings } from "../../../../src/config/DispatcherSettings.js"
import { TimingConfig } from "../../../../src/config/EngineConfig.js"
import { QueueSettings } from "../../../../src/config/QueueSettings.js"
import { MemoryDatabase } from "../../../../src/layers/memory/MemoryDatabase.js"
import { MemoryJobQueueControl, MemoryJobQueueLive } from "../../../../src/layers/memory/MemoryJobQueue.js"
import { DirectDispatchLive } from "../../../../src/main/AppLayers.js"
import { makeDispatcher } from "../../../../src/pipeline/outbox/dispatcher.js"
import { AiJobService } from "../../../../src/services/AiJobService.js"
import { queueJobIdFor } from "../../../../src/services/JobQueue.js"
import { OutboxDirectPublisher } from "../../../../src/services/outbox/OutboxDirectPublisher.js"
import { jobCreation, memoryRepositories } from "../../../support/foundationStack.js"

const graceMs = 5_000

/** Job creation with the creator's own queue add (as the composition root wires it), memory queue, TestClock. */
const stack = Layer.mergeAll(
  DispatcherSettings.make({ dispatcherId: "dispatcher-a" }),
  TimingConfig.make()
).pipe(
  Layer.provideMerge(
    jobCreation(memoryRepositories).pipe(
      Layer.provideMerge(
        OutboxDirectPublisher.Default.pipe(
          Layer.provide(
            Layer.succeed(DirectDispatchSettings, {
              enabled: true,
              grace: Duration.millis(graceMs),
              addTimeout: Duration.millis(1_000),
              flushDelay: Duration.millis(100),
              batchSize: 500
            })
          )
        )
      ),
      Layer.provideMerge(MemoryJobQueueLive.pipe(Layer.provide(QueueSettings.make()))),
      Layer.provideMerge(memoryRepositories)
    )
  ),
  Layer.orDie
)

/** The composition root's wiring under `OUTBOX_DIRECT_PUBLISH=false`: dispatcher-only mode. */
const dispatcherOnlyStack = Layer.mergeAll(
  DispatcherSettings.make({ dispatcherId: "dispatcher-a" }),
  TimingConfig.make()
).pipe(
  Layer.provideMerge(
    jobCreation(memoryRepositories).pipe(
      Layer.provideMerge(DirectDispatchLive.pipe(
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["OUTBOX_DIRECT_PUBLISH", "false"]]))))
      )),
      Layer.provideMerge(MemoryJobQueueLive.pipe(Layer.provide(QueueSettings.make()))),
      Layer.provideMerge(memoryRepositories)
    )
  ),
  Layer.orDie
)

const createJob = Effect.flatMap(
  AiJobService,
  (service) =>
    service.createJob({
      userId: "user-1",
      jobType: "synthetic_echo",
      targetType: "deck",
      targetId: "deck-1",
      input: { message: "hi" }
    })
).pipe(Effect.map((created) => created.job))

const createBatch = (count: number) =>
  Effect.flatMap(AiJobService, (service) =>
    service.createJobBatch({
      userId: "user-1",
      jobType: "synthetic_echo",
      items: Array.from(
        { length: count },
        (_, index) => ({ targetType: "deck", targetId: `deck-${index}`, input: { message: `hi ${index}` } })
      )
    })).pipe(Effect.map((created) => created.jobs))

const eventOf = (jobId: string) =>
  Effect.gen(function*() {
    const tables = yield* (yield* MemoryDatabase).snapshot
    const events = [...HashMap.values(tables.outboxEvent)].filter((event) => event.aggregateId === jobId)
    expect(events).toHaveLength(1)
    return events[0]!
  })

const queuedIds = Effect.flatMap(MemoryJobQueueControl, (control) => control.jobIds("ai-interactive"))

describe("the creator queues its own jobs; the dispatcher is the safety net (memory, TestClock)", () => {
  it.scoped("a created job is on the queue when createJob returns, and its event is marked published in a batch, no dispatcher running", () =>
    Effect.gen(function*() {
      const first = yield* createJob
      const second = yield* createJob
      expect([...(yield* queuedIds)].sort()).toEqual([queueJobIdFor(first.id), queueJobIdFor(second.id)].sort())
      expect((yield* eventOf(first.id)).status).toBe("pending")
      yield* TestClock.adjust(Duration.millis(100))
      yield* Effect.yieldNow()
      expect((yield* eventOf(first.id)).status).toBe("published")
      expect((yield* eventOf(second.id)).status).toBe("published")
    }).pipe(Effect.provide(stack)))

  it.scoped("a creator whose add never happened (queue down, as after a crash at that point): the dispatcher sweeps the event after the grace, once", () =>
    Effect.gen(function*() {
      const control = yield* MemoryJobQueueControl
      yield* control.setUnreachable(true)
      const job = yield* createJob
      yield* control.setUnreachable(false)
      expect(yield* queuedIds).toEqual([])
      const dispatcher = yield* makeDispatcher
      // Within the grace the event is the creator's: no dispatcher takes it.
      expect((yield* dispatcher.dispatchBatch).claimed).toBe(0)
      yield* TestClock.adjust(Duration.millis(graceMs))
      expect((yield* dispatcher.dispatchBatch).outcomes.published).toBe(1)
      expect((yield* eventOf(job.id)).status).toBe("published")
      expect(yield* queuedIds).toEqual([queueJobIdFor(job.id)])
    }).pipe(Effect.provide(stack)))

  it.scoped("a batch's jobs are on the queue (one bulk add) when createJobBatch returns; their events are marked published together", () =>
    Effect.gen(function*() {
      const jobs = yield* createBatch(3)
      expect([...(yield* queuedIds)].sort()).toEqual(jobs.map((job) => queueJobIdFor(job.id)).sort())
      yield* TestClock.adjust(Duration.millis(100))
      yield* Effect.yieldNow()
      for (const job of jobs) expect((yield* eventOf(job.id)).status).toBe("published")
    }).pipe(Effect.provide(stack)))

  it.scoped("a batch whose bulk add failed keeps its events pending: the dispatcher sweeps them after the grace", () =>
    Effect.gen(function*() {
      const control = yield* MemoryJobQueueControl
      yield* control.setUnreachable(true)
      const jobs = yield* createBatch(3)
      yield* control.setUnreachable(false)
      yield* TestClock.adjust(Duration.millis(100))
      yield* Effect.yieldNow()
      for (const job of jobs) expect((yield* eventOf(job.id)).status).toBe("pending")
      const dispatcher = yield* makeDispatcher
      expect((yield* dispatcher.dispatchBatch).claimed).toBe(0)
      yield* TestClock.adjust(Duration.millis(graceMs))
      expect((yield* dispatcher.dispatchBatch).outcomes.published).toBe(3)
      expect([...(yield* queuedIds)].sort()).toEqual(jobs.map((job) => queueJobIdFor(job.id)).sort())
    }).pipe(Effect.provide(stack)))

  it.scoped("OUTBOX_DIRECT_PUBLISH=false: the creator leaves the queue alone, and the dispatcher publishes the event at once, without a grace", () =>
    Effect.gen(function*() {
      const job = yield* createJob
      expect(yield* queuedIds).toEqual([])
      expect((yield* eventOf(job.id)).status).toBe("pending")
      const dispatcher = yield* makeDispatcher
      expect((yield* dispatcher.dispatchBatch).outcomes.published).toBe(1)
      expect((yield* eventOf(job.id)).status).toBe("published")
      expect(yield* queuedIds).toEqual([queueJobIdFor(job.id)])
    }).pipe(Effect.provide(dispatcherOnlyStack)))
})
