import { describe, expect, it } from "@effect/vitest"
import {
  Deferred,
  Duration,
  Effect,
  Either,
  Exit,
  Layer,
  Logger,
  LogLevel,
  Option,
  Queue,
  Scope,
  TestClock
} from "effect"
import { QueueSettings } from "../../../src/config/QueueSettings.js"
import type { QueueName } from "../../../src/domain/QueueName.js"
import { MemoryJobQueueControl, MemoryJobQueueLive } from "../../../src/layers/memory/MemoryJobQueue.js"
import {
  type JobDelivery,
  JobQueue,
  type JobQueueUnavailable,
  payloadFor,
  queueJobIdFor
} from "../../../src/services/JobQueue.js"

// The memory queue on the TestClock: backoffs, delays and the shutdown grace to the millisecond.
// Each test builds its own queue.
const queueLayer = () =>
  MemoryJobQueueLive.pipe(
    Layer.provide(
      QueueSettings.make({
        queues: { "ai-background": { attempts: 3, backoffDelay: Duration.millis(100), concurrency: 1 } },
        shutdownGrace: Duration.millis(500)
      })
    )
  )

const run = <A, E>(test: Effect.Effect<A, E, JobQueue | MemoryJobQueueControl | Scope.Scope>) =>
  test.pipe(Effect.provide(queueLayer()), Logger.withMinimumLogLevel(LogLevel.None))

const bg: QueueName = "ai-background"
const payload = (jobId: string) =>
  payloadFor({ jobId, jobType: "quiz_generation", createdAt: new Date("2026-06-20T08:00:00.000Z") })
const add = (jobId: string, options: { readonly priority?: number; readonly delayMs?: number } = {}) =>
  Effect.flatMap(
    JobQueue,
    (queue) =>
      queue.add({
        queueName: bg,
        payload: payload(jobId),
        priority: options.priority ?? 50,
        ...(options.delayMs === undefined ? {} : { delay: Duration.millis(options.delayMs) })
      })
  )

/** Runs queued fibers until `done` holds (no time passes on the TestClock). */
const until = <A, E, R>(check: Effect.Effect<A, E, R>, done: (a: A) => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1_000; i++) {
      const value = yield* check
      if (done(value)) return value
      yield* Effect.yieldNow()
    }
    return yield* Effect.dieMessage("condition never reached")
  })

const counts = Effect.flatMap(JobQueue, (queue) => queue.counts(bg))
const stateOf = (jobId: string) => Effect.flatMap(JobQueue, (queue) => queue.state(bg, queueJobIdFor(jobId)))
/** The TestClock's sleepers: a backoff or delay is scheduled once its sleep is registered. */
const sleepersReach = (n: number) => until(TestClock.sleeps(), (sleeps) => sleeps.length >= n)

/** A consumer whose handler records each delivery and then does what `handle` says. */
const consumer = (
  handle: (delivery: JobDelivery) => Effect.Effect<void, string>,
  options: { readonly concurrency?: number } = {}
) =>
  Effect.gen(function*() {
    const queue = yield* JobQueue
    const deliveries = yield* Queue.unbounded<JobDelivery>()
    yield* queue.consume(
      bg,
      (delivery) => Effect.zipRight(Queue.offer(deliveries, delivery), handle(delivery)),
      options
    )
    return deliveries
  })

describe("MemoryJobQueue on the TestClock", () => {
  it.scoped("a failed delivery comes back after the backoff, doubled each time, until the attempts are used up", () =>
    run(Effect.gen(function*() {
      const deliveries = yield* consumer(() => Effect.fail("refused"))
      yield* add("job-1")
      expect((yield* Queue.take(deliveries)).attempt).toBe(1)
      yield* until(counts, (c) => c.delayed === 1)
      yield* sleepersReach(1)
      expect(yield* stateOf("job-1")).toStrictEqual({ _tag: "Waiting" })
      yield* TestClock.adjust(99)
      expect(yield* Queue.size(deliveries)).toBe(0)
      yield* TestClock.adjust(1)
      const second = yield* Queue.take(deliveries)
      expect([second.attempt, second.maxAttempts]).toStrictEqual([2, 3])
      yield* until(counts, (c) => c.delayed === 1)
      yield* sleepersReach(1)
      yield* TestClock.adjust(199)
      expect(yield* Queue.size(deliveries)).toBe(0)
      yield* TestClock.adjust(1)
      expect((yield* Queue.take(deliveries)).attempt).toBe(3)
      // The last attempt failed: the job is dropped, not retried.
      yield* until(stateOf("job-1"), (state) => state._tag === "Gone")
      expect(yield* counts).toStrictEqual({ waiting: 0, active: 0, delayed: 0 })
      yield* TestClock.adjust(10_000)
      expect(yield* Queue.size(deliveries)).toBe(0)
    })))

  it.scoped("a defect in the handler is retried like a failure", () =>
    run(Effect.gen(function*() {
      const deliveries = yield* consumer((delivery) => delivery.attempt === 1 ? Effect.die("boom") : Effect.void)
      yield* add("job-1")
      expect((yield* Queue.take(deliveries)).attempt).toBe(1)
      yield* until(counts, (c) => c.delayed === 1)
      yield* sleepersReach(1)
      yield* TestClock.adjust(100)
      expect((yield* Queue.take(deliveries)).attempt).toBe(2)
      yield* until(stateOf("job-1"), (state) => state._tag === "Gone")
    })))

  it.scoped("equal priorities are delivered in the order they were added, after higher ones", () =>
    run(Effect.gen(function*() {
      for (const [jobId, priority] of [["b-1", 50], ["b-2", 50], ["a-1", 10], ["b-3", 50], ["c-1", 90]] as const) {
        yield* add(jobId, { priority })
      }
      const deliveries = yield* consumer(() => Effect.void, { concurrency: 1 })
      const order: Array<string> = []
      for (let i = 0; i < 5; i++) order.push((yield* Queue.take(deliveries)).payload.jobId)
      expect(order).toStrictEqual(["a-1", "b-1", "b-2", "b-3", "c-1"])
    })))

  it.scoped("counts and state tell waiting, active (since when it was taken) and delayed jobs apart", () =>
    run(Effect.gen(function*() {
      yield* TestClock.setTime(5_000)
      const release = yield* Deferred.make<void>()
      yield* add("active")
      yield* add("waiting")
      yield* add("delayed", { delayMs: 1_000 })
      expect(yield* add("delayed")).toBe("duplicate")
      expect(yield* counts).toStrictEqual({ waiting: 2, active: 0, delayed: 1 })
      const deliveries = yield* consumer(() => Deferred.await(release), { concurrency: 1 })
      expect((yield* Queue.take(deliveries)).payload.jobId).toBe("active")
      yield* until(stateOf("active"), (state) => state._tag === "Active")
      yield* TestClock.adjust(300)
      expect(yield* stateOf("active")).toStrictEqual({ _tag: "Active", activeSinceMs: 5_000 })
      expect(yield* stateOf("waiting")).toStrictEqual({ _tag: "Waiting" })
      expect(yield* stateOf("delayed")).toStrictEqual({ _tag: "Waiting" })
      expect(yield* counts).toStrictEqual({ waiting: 1, active: 1, delayed: 1 })
      expect(yield* add("active")).toBe("duplicate")
      const control = yield* MemoryJobQueueControl
      expect([...(yield* control.jobIds(bg))].sort()).toStrictEqual(
        ["active", "delayed", "waiting"].map(queueJobIdFor).sort()
      )
      expect(yield* control.jobIds("ai-interactive")).toStrictEqual([])
      yield* Deferred.succeed(release, undefined)
      yield* until(stateOf("active"), (state) => state._tag === "Gone")
    })))

  it.scoped("a delay is rounded to whole milliseconds; none, or a negative one, is no delay", () =>
    run(Effect.gen(function*() {
      yield* add("none", { delayMs: 0.4 })
      yield* add("negative", { delayMs: -50 })
      expect(yield* counts).toStrictEqual({ waiting: 2, active: 0, delayed: 0 })
      yield* add("rounded", { delayMs: 1.6 })
      expect((yield* counts).delayed).toBe(1)
      yield* sleepersReach(1)
      yield* TestClock.adjust(1)
      expect((yield* counts).delayed).toBe(1)
      yield* TestClock.adjust(1)
      yield* until(counts, (c) => c.delayed === 0)
      expect((yield* counts).waiting).toBe(3)
    })))

  it.scoped("a duplicate of a delayed job leaves its delay alone", () =>
    run(Effect.gen(function*() {
      yield* add("job-1", { delayMs: 1_000 })
      expect(yield* add("job-1", { delayMs: 100 })).toBe("duplicate")
      expect(yield* add("job-1")).toBe("duplicate")
      yield* sleepersReach(1)
      yield* TestClock.adjust(999)
      for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
      expect(yield* counts).toStrictEqual({ waiting: 0, active: 0, delayed: 1 })
      yield* TestClock.adjust(1)
      yield* until(counts, (c) => c.waiting === 1)
    })))

  it.scoped("while the queue is unreachable it refuses every call and delivers nothing; once back it delivers", () =>
    run(Effect.gen(function*() {
      const queue = yield* JobQueue
      const control = yield* MemoryJobQueueControl
      yield* add("job-1")
      yield* control.setUnreachable(true)
      const refusals: ReadonlyArray<Either.Either<unknown, JobQueueUnavailable>> = [
        yield* Effect.either(add("job-2")),
        yield* Effect.either(queue.counts(bg)),
        yield* Effect.either(queue.contains(bg, queueJobIdFor("job-1"))),
        yield* Effect.either(queue.state(bg, queueJobIdFor("job-1")))
      ]
      expect(refusals.map((r) => Either.isLeft(r) ? [r.left._tag, r.left.operation] : "answered")).toStrictEqual([
        ["JobQueueUnavailable", "add"],
        ["JobQueueUnavailable", "counts"],
        ["JobQueueUnavailable", "contains"],
        ["JobQueueUnavailable", "state"]
      ])
      const deliveries = yield* consumer(() => Effect.void)
      for (let i = 0; i < 50; i++) yield* Effect.yieldNow()
      expect(yield* Queue.size(deliveries)).toBe(0)
      yield* control.setUnreachable(false)
      expect((yield* Queue.take(deliveries)).payload.jobId).toBe("job-1")
      expect(yield* queue.contains(bg, queueJobIdFor("job-2"))).toBe(false)
    })))

  it.scoped("a concurrency below one still runs one delivery at a time", () =>
    run(Effect.gen(function*() {
      const deliveries = yield* consumer(() => Effect.void, { concurrency: 0 })
      yield* add("job-1")
      expect((yield* Queue.take(deliveries)).payload.jobId).toBe("job-1")
    })))

  it.scoped("closing a consumer waits for an active delivery up to the grace, then aborts it and puts the job back", () =>
    run(Effect.gen(function*() {
      const scope = yield* Scope.make()
      const deliveries = yield* consumer(() => Effect.never).pipe(Scope.extend(scope))
      yield* add("job-1")
      const first = yield* Queue.take(deliveries)
      // A daemon: a close that never ends must fail this test, not hang it.
      const closing = yield* Effect.forkDaemon(Scope.close(scope, Exit.void))
      yield* sleepersReach(1)
      yield* TestClock.adjust(499)
      expect(first.signal.aborted).toBe(false)
      expect(Option.isNone(yield* closing.poll)).toBe(true)
      yield* TestClock.adjust(1)
      // Finalizers run uninterruptibly: the grace must still be able to cut the wait short.
      yield* until(closing.poll, Option.isSome)
      expect(first.signal.aborted).toBe(true)
      expect(yield* counts).toStrictEqual({ waiting: 1, active: 0, delayed: 0 })
      // Taken again, the interrupted delivery counts as an attempt.
      const again = yield* Effect.scoped(Effect.flatMap(consumer(() => Effect.void), Queue.take))
      expect(again.attempt).toBe(2)
    })))

  it.scoped("closing a consumer lets an active delivery finish within the grace, and takes no more jobs", () =>
    run(Effect.gen(function*() {
      const scope = yield* Scope.make()
      const release = yield* Deferred.make<void>()
      const deliveries = yield* consumer(() => Deferred.await(release), { concurrency: 1 }).pipe(Scope.extend(scope))
      yield* add("job-1")
      yield* add("job-2")
      const first = yield* Queue.take(deliveries)
      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      yield* sleepersReach(1)
      yield* TestClock.adjust(200)
      yield* Deferred.succeed(release, undefined)
      yield* closing.await
      expect(first.signal.aborted).toBe(false)
      expect(yield* stateOf("job-1")).toStrictEqual({ _tag: "Gone" })
      expect(yield* stateOf("job-2")).toStrictEqual({ _tag: "Waiting" })
      expect(yield* Queue.size(deliveries)).toBe(0)
    })))
})
