import { describe, expect, it } from "@effect/vitest"
import { Chunk, DateTime, Duration, Effect, Fiber, Option, Queue, Stream, TestClock } from "effect"
import type { JobEvent } from "../../../src/domain/JobEvent.js"
import { InProcessCancelSignal } from "../../../src/layers/memory/InProcessCancelSignal.js"
import { InProcessJobEvents } from "../../../src/layers/memory/InProcessJobEvents.js"
import { InProcessOutboxSignal } from "../../../src/layers/memory/InProcessOutboxSignal.js"
import { MemoryWorkerDirectory, workerHeartbeatTtlMs } from "../../../src/layers/memory/MemoryWorkerDirectory.js"
import { CancelSignal } from "../../../src/services/CancelSignal.js"
import { JobEvents } from "../../../src/services/JobEvents.js"
import { OutboxSignal } from "../../../src/services/outbox/OutboxSignal.js"
import { WorkerDirectory, type WorkerHeartbeat } from "../../../src/services/WorkerDirectory.js"

// Each test builds its own layer, so the adapter's state is the test's alone.

/** Lets forked fibers run until they block: every wait here is on a queue or a latch. */
const settle = Effect.repeatN(Effect.yieldNow(), 20)

/** A fiber that should be waiting still is; a hung one fails the test instead of the suite's timeout. */
const stillWaiting = <A, E>(fiber: Fiber.Fiber<A, E>) => Effect.map(Fiber.poll(fiber), Option.isNone)
const joinSoon = <A, E>(fiber: Fiber.Fiber<A, E>) =>
  Fiber.join(fiber).pipe(
    Effect.timeoutFail({ duration: Duration.seconds(5), onTimeout: () => new Error("still waiting") })
  )

const event = (jobId: string, progress: number): JobEvent => ({
  jobId,
  lifecycleStatus: "running",
  progress,
  stage: "EXECUTE",
  attempt: 1,
  at: DateTime.unsafeMake(0)
})

describe("InProcessCancelSignal", () => {
  it.live("await completes on a cancel of its own job, not on another job's", () =>
    Effect.gen(function*() {
      const signal = yield* CancelSignal
      const waiting = yield* Effect.fork(signal.await("job-a"))
      yield* settle
      yield* signal.publish("job-b")
      yield* settle
      expect(yield* stillWaiting(waiting)).toBe(true)
      yield* signal.publish("job-a")
      yield* joinSoon(waiting)
    }).pipe(Effect.provide(InProcessCancelSignal)))

  it.live("subscribe streams every cancel published after it, in order", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const signal = yield* CancelSignal
        const cancels = yield* signal.subscribe
        yield* signal.publish("job-1")
        yield* signal.publish("job-2")
        const seen = yield* Stream.runCollect(Stream.take(cancels, 2)).pipe(Effect.timeout(Duration.seconds(5)))
        expect(Chunk.toReadonlyArray(seen)).toStrictEqual(["job-1", "job-2"])
      })
    ).pipe(Effect.provide(InProcessCancelSignal)))
})

describe("InProcessJobEvents", () => {
  it.live("a subscriber gets its job's events only; a publish nobody watches is dropped", () =>
    Effect.gen(function*() {
      const events = yield* JobEvents
      yield* events.publish(event("job-a", 1))
      yield* Effect.scoped(
        Effect.gen(function*() {
          const mine = yield* events.subscribe("job-a")
          yield* events.publish(event("job-b", 5))
          yield* events.publish(event("job-a", 10))
          expect((yield* Queue.take(mine)).progress).toBe(10)
          expect(yield* Queue.size(mine)).toBe(0)
        })
      )
    }).pipe(Effect.provide(InProcessJobEvents)))

  it.live("two subscribers of one job share its topic; the one left keeps receiving, and a later one gets a fresh topic", () =>
    Effect.gen(function*() {
      const events = yield* JobEvents
      yield* Effect.scoped(
        Effect.gen(function*() {
          const staying = yield* events.subscribe("job-a")
          yield* Effect.scoped(
            Effect.gen(function*() {
              const leaving = yield* events.subscribe("job-a")
              yield* events.publish(event("job-a", 1))
              expect((yield* Queue.take(leaving)).progress).toBe(1)
            })
          )
          yield* events.publish(event("job-a", 2))
          expect(
            yield* Queue.takeAll(staying).pipe(Effect.map((all) => Chunk.toReadonlyArray(all).map((e) => e.progress)))
          )
            .toStrictEqual([1, 2])
        })
      )
      // The last subscriber left: the topic is gone, and a new subscription works on a new one.
      yield* Effect.scoped(
        Effect.gen(function*() {
          const later = yield* events.subscribe("job-a")
          yield* events.publish(event("job-a", 3))
          const taken = yield* Queue.take(later).pipe(Effect.timeout(Duration.seconds(5)))
          expect(taken.progress).toBe(3)
        })
      )
    }).pipe(Effect.provide(InProcessJobEvents)))
})

describe("InProcessOutboxSignal", () => {
  it.live("a signal raised before the wait is kept; the next wait waits for the next signal", () =>
    Effect.gen(function*() {
      const signal = yield* OutboxSignal
      yield* signal.notify
      yield* signal.await.pipe(Effect.timeout(Duration.seconds(5)))
      const next = yield* Effect.fork(signal.await)
      yield* settle
      expect(yield* stillWaiting(next)).toBe(true)
      yield* signal.notify
      yield* joinSoon(next)
    }).pipe(Effect.provide(InProcessOutboxSignal)))

  it.live("every waiter wakes on one signal", () =>
    Effect.gen(function*() {
      const signal = yield* OutboxSignal
      const waiters = yield* Effect.forEach([1, 2], () => Effect.fork(signal.await))
      yield* settle
      yield* signal.notify
      yield* Effect.forEach(waiters, joinSoon)
    }).pipe(Effect.provide(InProcessOutboxSignal)))
})

const heartbeat = (instanceId: string): WorkerHeartbeat => ({
  instanceId,
  hostname: "host",
  pid: 1,
  queues: ["ai-interactive"],
  jobIds: [],
  startedAt: "2026-01-01T00:00:00.000Z",
  beatAt: "2026-01-01T00:00:00.000Z"
})

describe("MemoryWorkerDirectory", () => {
  it.effect("lists live workers by instance id until 90 s after their last beat", () =>
    Effect.gen(function*() {
      const directory = yield* WorkerDirectory
      yield* directory.beat(heartbeat("w-2"))
      yield* directory.beat(heartbeat("w-1"))
      expect((yield* directory.live).map((h) => h.instanceId)).toStrictEqual(["w-1", "w-2"])
      yield* TestClock.adjust(workerHeartbeatTtlMs - 1)
      yield* directory.beat(heartbeat("w-2"))
      expect((yield* directory.live).map((h) => h.instanceId)).toStrictEqual(["w-1", "w-2"])
      // Exactly 90 s after its beat, w-1 is gone; w-2 beat again.
      yield* TestClock.adjust(1)
      expect((yield* directory.live).map((h) => h.instanceId)).toStrictEqual(["w-2"])
      yield* directory.remove("w-2")
      expect(yield* directory.live).toStrictEqual([])
    }).pipe(Effect.provide(MemoryWorkerDirectory)))

  it.effect("a beat replaces the worker's previous heartbeat", () =>
    Effect.gen(function*() {
      const directory = yield* WorkerDirectory
      yield* directory.beat(heartbeat("w-1"))
      yield* directory.beat({ ...heartbeat("w-1"), jobIds: ["job-1"] })
      expect(yield* directory.live).toStrictEqual([{ ...heartbeat("w-1"), jobIds: ["job-1"] }])
    }).pipe(Effect.provide(MemoryWorkerDirectory)))
})
