import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Ref, TestClock } from "effect"
import { DispatcherSettings } from "../../../../src/config/DispatcherSettings.js"
import { TimingConfig } from "../../../../src/config/EngineConfig.js"
import { EventDeliverySettings } from "../../../../src/config/EventDeliverySettings.js"
import { QueueSettings } from "../../../../src/config/QueueSettings.js"
import { byLease, leaseOf } from "../../../../src/domain/AiJob.js"
import { finishedEventId } from "../../../../src/domain/JobFinishedEvent.js"
import { MemoryJobQueueControl, MemoryJobQueueLive } from "../../../../src/layers/memory/MemoryJobQueue.js"
import { OutboxDispatcherLive } from "../../../../src/pipeline/outbox/dispatcher.js"
import { eventRetryDelay, makeEventDispatcher } from "../../../../src/pipeline/outbox/eventDispatcher.js"
import { AiJobLifecycleRepository } from "../../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../../src/services/AiJobService.js"
import { queueJobIdFor } from "../../../../src/services/JobQueue.js"
import {
  type EventDelivery,
  EventDeliveryFailed,
  type EventTarget,
  EventTargets
} from "../../../../src/services/outbox/EventTargets.js"
import { OutboxRepository } from "../../../../src/services/outbox/OutboxRepository.js"
import { jobCreation, memoryRepositories } from "../../../support/foundationStack.js"

/** A target whose answers the test scripts: each call takes the next answer (the last one repeats). */
const scriptedTarget = (
  key: string,
  answers: ReadonlyArray<"ok" | "fail" | "hang" | { readonly retryAfterMs: number }>
) =>
  Effect.map(Ref.make<ReadonlyArray<EventDelivery>>([]), (calls) => {
    const target: EventTarget = {
      key,
      label: `target ${key}`,
      deliver: (delivery) =>
        Effect.flatMap(Ref.getAndUpdate(calls, (all) => [...all, delivery]), (before) => {
          const answer = answers[Math.min(before.length, answers.length - 1)]!
          if (answer === "ok") return Effect.void
          if (answer === "hang") return Effect.never
          return Effect.fail(
            new EventDeliveryFailed(
              answer === "fail" ? { reason: "answered 500" } : { reason: "answered 429", ...answer }
            )
          )
        })
    }
    return { target, calls }
  })

const settings = {
  concurrency: 4,
  deliveryTimeout: Duration.millis(2_000),
  retryBaseDelay: Duration.millis(1_000),
  retryMaxDelay: Duration.millis(8_000),
  retryFor: Duration.millis(60_000)
}

const stack = (targets: ReadonlyArray<EventTarget>, overrides: Partial<typeof settings> = {}) =>
  Layer.mergeAll(
    DispatcherSettings.make({ dispatcherId: "dispatcher-a" }),
    EventDeliverySettings.make({ ...settings, ...overrides }),
    Layer.succeed(EventTargets, targets)
  ).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        MemoryJobQueueLive.pipe(Layer.provide(QueueSettings.make())),
        TimingConfig.make({ outboxPollInterval: Duration.millis(100) })
      )
    ),
    Layer.provideMerge(jobCreation(memoryRepositories)),
    Layer.orDie
  )

/** A job run to success by hand: its `ai.job.succeeded` event is pending in the notify lane. */
const succeededJob = Effect.gen(function*() {
  const service = yield* AiJobService
  const repo = yield* AiJobLifecycleRepository
  const { job } = yield* service.createJob({
    userId: "user-1",
    jobType: "synthetic_echo",
    targetType: "deck",
    targetId: "d-1",
    input: { message: "secret input" }
  })
  const running = yield* repo.lockJob(job.id, "worker-a", Duration.millis(60_000))
  yield* repo.markSucceeded(leaseOf(running)!, "a".repeat(64), {
    locked: running,
    artifacts: [{ artifactType: "synthetic_echo_result", artifactId: "r-1" }]
  })
  return job
})

const terminalEvent = (jobId: string) =>
  Effect.flatMap(OutboxRepository, (outbox) => outbox.findById(finishedEventId(jobId))).pipe(
    Effect.map(Option.getOrThrow)
  )

/** Lets forked fibers run, moving the TestClock in small steps, until `done` holds. */
const eventually = <A, E, R>(check: Effect.Effect<A, E, R>, done: (a: A) => boolean, stepMs = 100) =>
  Effect.gen(function*() {
    for (let i = 0; i < 2_000; i++) {
      const value = yield* check
      if (done(value)) return value
      yield* TestClock.adjust(Duration.millis(stepMs))
    }
    return yield* Effect.dieMessage("condition never held")
  })

const startLane = Effect.flatMap(makeEventDispatcher, (lane) => lane.run)

describe("notify lane (memory, TestClock)", () => {
  it.scoped("a terminal event reaches every target under its one id and is published", () =>
    Effect.gen(function*() {
      const a = yield* scriptedTarget("a", ["ok"])
      const b = yield* scriptedTarget("b", ["ok"])
      yield* Effect.gen(function*() {
        yield* startLane
        const job = yield* succeededJob
        const event = yield* eventually(terminalEvent(job.id), (row) => row.status === "published")
        expect(event.deliveredTo).toEqual(["a", "b"])
        for (const target of [a, b]) {
          const calls = yield* Ref.get(target.calls)
          expect(calls).toHaveLength(1)
          expect(calls[0]!.eventId).toBe(finishedEventId(job.id))
          expect(calls[0]!.body).toMatchObject({
            type: "ai.job.succeeded",
            data: {
              jobId: job.id,
              lifecycleStatus: "succeeded",
              artifacts: [{ artifactType: "synthetic_echo_result", artifactId: "r-1" }]
            }
          })
          expect(JSON.stringify(calls[0]!.body)).not.toContain("secret input")
        }
      }).pipe(Effect.provide(stack([a.target, b.target])))
    }))

  it.scoped("a refused round is retried after its back-off to the refusing target only, under the same id", () =>
    Effect.gen(function*() {
      const healthy = yield* scriptedTarget("healthy", ["ok"])
      const flaky = yield* scriptedTarget("flaky", ["fail", "ok"])
      yield* Effect.gen(function*() {
        yield* startLane
        const job = yield* succeededJob
        const retrying = yield* eventually(terminalEvent(job.id), (row) => row.attemptCount === 1)
        expect(retrying).toMatchObject({
          status: "pending",
          deliveredTo: ["healthy"],
          lastError: "target flaky: answered 500"
        })
        // Jittered from the 1 s base: not before 0.8 s.
        expect(retrying.availableAt.getTime() - retrying.updatedAt.getTime()).toBeGreaterThanOrEqual(800)
        const published = yield* eventually(terminalEvent(job.id), (row) => row.status === "published")
        expect(published.deliveredTo).toEqual(["healthy", "flaky"])
        expect((yield* Ref.get(healthy.calls)).length).toBe(1)
        const flakyCalls = yield* Ref.get(flaky.calls)
        expect(flakyCalls.map((call) => call.eventId)).toEqual([finishedEventId(job.id), finishedEventId(job.id)])
      }).pipe(Effect.provide(stack([healthy.target, flaky.target])))
    }))

  it.scoped("a target that does not answer in time fails the round; one that asks for a pause gets it", () =>
    Effect.gen(function*() {
      const slow = yield* scriptedTarget("slow", ["hang", "ok"])
      const busy = yield* scriptedTarget("busy", [{ retryAfterMs: 30_000 }, "ok"])
      yield* Effect.gen(function*() {
        yield* startLane
        const job = yield* succeededJob
        const retrying = yield* eventually(terminalEvent(job.id), (row) => row.attemptCount === 1)
        expect(retrying.lastError).toBe("target slow: no answer within 2000 ms; target busy: answered 429")
        expect(retrying.availableAt.getTime() - retrying.updatedAt.getTime()).toBe(8_000)
        yield* eventually(terminalEvent(job.id), (row) => row.status === "published", 500)
      }).pipe(Effect.provide(stack([slow.target, busy.target])))
    }))

  it.scoped("once the retry time is spent the event is dead, with what the target answered", () =>
    Effect.gen(function*() {
      const down = yield* scriptedTarget("down", ["fail"])
      yield* Effect.gen(function*() {
        yield* startLane
        const job = yield* succeededJob
        // 1 + 2 + 4 s fit in 7 s; the fourth delay (8 s) would not.
        const dead = yield* eventually(terminalEvent(job.id), (row) => row.status === "dead")
        expect(dead).toMatchObject({ attemptCount: 4, deliveredTo: [], lastError: "target down: answered 500" })
        expect((yield* Ref.get(down.calls)).length).toBe(4)
      }).pipe(Effect.provide(stack([down.target], { retryFor: Duration.millis(7_000) })))
    }))

  it.effect("the retry schedule: doubling from the base, jittered, capped, bounded by its total", () =>
    Effect.gen(function*() {
      const bounded = {
        retryBaseDelay: Duration.millis(1_000),
        retryMaxDelay: Duration.millis(4_000),
        retryFor: Duration.millis(15_000)
      }
      const delays = yield* Effect.forEach(
        [1, 2, 3, 4, 5, 6],
        (failure) => Effect.map(eventRetryDelay(bounded, failure), Option.map(Duration.toMillis))
      )
      // 1 + 2 + 4 + 4 + 4 = 15 s: five retries; the sixth would pass the bound.
      expect(delays.map(Option.isSome)).toEqual([true, true, true, true, true, false])
      const nominal = [1_000, 2_000, 4_000, 4_000, 4_000]
      delays.slice(0, 5).forEach((delay, index) => {
        const ms = Option.getOrThrow(delay)
        expect(ms).toBeGreaterThanOrEqual(nominal[index]! * 0.8 - 1)
        expect(ms).toBeLessThanOrEqual(Math.min(4_000, nominal[index]! * 1.2) + 1)
      })
    }))

  it.scoped("with no target the events are settled at once; a failed job and a cancelled one are announced as such", () =>
    Effect.gen(function*() {
      const repo = yield* AiJobLifecycleRepository
      const service = yield* AiJobService
      yield* startLane
      const failing = (yield* service.createJob({
        userId: "u",
        jobType: "synthetic_echo",
        targetType: "t",
        targetId: "t",
        input: { message: "x" }
      })).job
      const running = yield* repo.lockJob(failing.id, "worker-a", Duration.millis(60_000))
      yield* repo.markFailed(byLease(leaseOf(running)!), {
        errorCode: "PROVIDER_UNAVAILABLE",
        publicErrorMessage: "p",
        internalErrorMessage: "i"
      })
      const queued = (yield* service.createJob({
        userId: "u",
        jobType: "synthetic_echo",
        targetType: "t",
        targetId: "t",
        input: { message: "y" }
      })).job
      yield* repo.requestCancel(queued.id)
      const failedEvent = yield* eventually(terminalEvent(failing.id), (row) => row.status === "published")
      const cancelledEvent = yield* eventually(terminalEvent(queued.id), (row) => row.status === "published")
      expect([failedEvent.eventType, cancelledEvent.eventType]).toEqual(["ai.job.failed", "ai.job.cancelled"])
      expect(failedEvent.deliveredTo).toEqual([])
    }).pipe(Effect.provide(stack([]))))

  it.scoped("a target that never answers does not delay the enqueue lane", () =>
    Effect.gen(function*() {
      const stuck = yield* scriptedTarget("stuck", ["hang"])
      yield* Effect.gen(function*() {
        yield* Layer.build(OutboxDispatcherLive)
        // More terminal events than the lane has slots, all held by the stuck target.
        const finished = yield* Effect.forEach(Array.from({ length: 6 }), () => succeededJob)
        yield* TestClock.adjust(Duration.millis(200))
        const service = yield* AiJobService
        const { job } = yield* service.createJob({
          userId: "u",
          jobType: "synthetic_echo",
          targetType: "t",
          targetId: "t",
          input: { message: "z" }
        })
        // The create's wake-up alone (no clock movement) gets it onto its queue.
        yield* eventually(Effect.flatMap(MemoryJobQueueControl, (control) => control.jobIds("ai-interactive")), (ids) =>
          ids.includes(queueJobIdFor(job.id)), 0)
        // Each lane kept to its own events: two terminal events in flight, the rest waiting.
        const statuses = yield* Effect.forEach(finished, (done) =>
          Effect.map(terminalEvent(done.id), (row) =>
            row.status))
        expect([...statuses].sort()).toEqual(["pending", "pending", "pending", "pending", "processing", "processing"])
        // The stuck deliveries time out, so the lane can stop.
        yield* TestClock.adjust(Duration.seconds(5))
      }).pipe(Effect.provide(stack([stuck.target], { concurrency: 2, deliveryTimeout: Duration.millis(4_000) })))
    }))
})
