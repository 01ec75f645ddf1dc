import { expect, layer } from "@effect/vitest"
import { Context, Duration, Effect, Layer, Queue, Ref } from "effect"
import type { QueueName } from "../../src/domain/QueueName.js"
import { type JobDelivery, JobHandedOff, JobQueue, payloadFor, queueJobIdFor } from "../../src/services/JobQueue.js"

/** What the contract needs beyond the JobQueue itself: a way to put a poison message on a queue. */
export class JobQueueTestKit extends Context.Tag("test/JobQueueTestKit")<
  JobQueueTestKit,
  { readonly addRaw: (queueName: QueueName, queueJobId: string, data: unknown) => Effect.Effect<void> }
>() {}

let counter = 0
/** A job id unique in this run (the layer is shared by every test of the suite). */
const newJobId = (label: string) => `${label}-${Date.now().toString(36)}-${++counter}`

const payload = (jobId: string, jobType = "quiz_generation") =>
  payloadFor({ jobId, jobType, createdAt: new Date("2026-06-20T08:00:00.000Z") })

const within = Duration.seconds(10)

/** Starts a consumer that records deliveries (job ids) on a queue; `fail` decides failures per delivery. */
const recordingConsumer = (
  queueName: QueueName,
  options: {
    readonly concurrency?: number
    readonly fail?: (delivery: JobDelivery) => boolean
    /** Every delivery is handed back, as by a worker that is stopping. */
    readonly stopping?: boolean
    readonly holdMs?: number
  } = {}
) =>
  Effect.gen(function*() {
    const jobQueue = yield* JobQueue
    const deliveries = yield* Queue.unbounded<JobDelivery>()
    const inFlight = yield* Ref.make(0)
    const maxInFlight = yield* Ref.make(0)
    yield* jobQueue.consume(
      queueName,
      (delivery) =>
        Effect.gen(function*() {
          const now = yield* Ref.updateAndGet(inFlight, (n) => n + 1)
          yield* Ref.update(maxInFlight, (m) => Math.max(m, now))
          yield* Queue.offer(deliveries, delivery)
          if (options.holdMs !== undefined) yield* Effect.sleep(Duration.millis(options.holdMs))
          yield* Ref.update(inFlight, (n) => n - 1)
          if (options.fail?.(delivery) === true) return yield* Effect.fail("handler refused" as const)
          if (options.stopping === true) {
            return yield* new JobHandedOff({
              jobId: delivery.payload.jobId,
              reason: "worker stopping",
              consumerStopping: true
            })
          }
        }),
      options.concurrency === undefined ? {} : { concurrency: options.concurrency }
    )
    const next = Queue.take(deliveries).pipe(
      Effect.timeoutFail({ duration: within, onTimeout: () => new Error("no delivery within 10 s") })
    )
    return { next, deliveries, maxInFlight }
  })

const pollUntil = <A, E, R>(check: Effect.Effect<A, E, R>, done: (a: A) => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 400; i++) {
      const value = yield* check
      if (done(value)) return value
      yield* Effect.sleep(Duration.millis(25))
    }
    return yield* Effect.dieMessage("condition not reached within 10 s")
  })

/**
 * The JobQueue contract, run against the in-memory and the BullMQ layers. The layer must use
 * short backoffs (tests wait for retries in real time) and must not be shared with other suites.
 */
export const jobQueueContract = (name: string, queueLayer: Layer.Layer<JobQueue | JobQueueTestKit, unknown>) =>
  layer(queueLayer, { excludeTestServices: true, timeout: Duration.seconds(60) })(
    `JobQueue contract: ${name}`,
    (it) => {
      it.scoped("delivers an added job with its decoded payload, then removes it", () =>
        Effect.gen(function*() {
          const jobQueue = yield* JobQueue
          const jobId = newJobId("deliver")
          expect(yield* jobQueue.add({ queueName: "ai-interactive", payload: payload(jobId), priority: 10 })).toBe(
            "added"
          )
          const consumer = yield* recordingConsumer("ai-interactive")
          const delivery = yield* consumer.next
          expect(delivery.payload).toEqual(payload(jobId))
          expect(delivery.queueJobId).toBe(queueJobIdFor(jobId))
          expect(delivery.queueJobId).not.toContain(":")
          expect(delivery.attempt).toBe(1)
          expect(delivery.maxAttempts).toBe(2)
          expect(delivery.signal.aborted).toBe(false)
          yield* pollUntil(jobQueue.counts("ai-interactive"), (c) => c.waiting + c.active + c.delayed === 0)
        }))

      it.scoped("an id that is waiting is not added twice", () =>
        Effect.gen(function*() {
          const jobQueue = yield* JobQueue
          const jobId = newJobId("dedupe")
          expect(yield* jobQueue.add({ queueName: "ai-background", payload: payload(jobId), priority: 50 })).toBe(
            "added"
          )
          expect(yield* jobQueue.add({ queueName: "ai-background", payload: payload(jobId), priority: 50 })).toBe(
            "duplicate"
          )
          expect((yield* jobQueue.counts("ai-background")).waiting).toBe(1)
          const consumer = yield* recordingConsumer("ai-background")
          expect((yield* consumer.next).payload.jobId).toBe(jobId)
          yield* pollUntil(jobQueue.counts("ai-background"), (c) => c.waiting + c.active + c.delayed === 0)
          yield* Effect.sleep(Duration.millis(200))
          expect(yield* Queue.size(consumer.deliveries)).toBe(0)
        }))

      it.scoped("contains: a waiting job's id, on its own queue only; not once it finished", () =>
        Effect.gen(function*() {
          const jobQueue = yield* JobQueue
          const jobId = newJobId("contains")
          const queueJobId = queueJobIdFor(jobId)
          expect(yield* jobQueue.contains("ai-background", queueJobId)).toBe(false)
          yield* jobQueue.add({ queueName: "ai-background", payload: payload(jobId), priority: 50 })
          expect(yield* jobQueue.contains("ai-background", queueJobId)).toBe(true)
          expect(yield* jobQueue.contains("ai-interactive", queueJobId)).toBe(false)
          const consumer = yield* recordingConsumer("ai-background")
          expect((yield* consumer.next).payload.jobId).toBe(jobId)
          yield* pollUntil(jobQueue.contains("ai-background", queueJobId), (found) => !found)
        }))

      it.scoped("a finished job's id can be queued and delivered again", () =>
        Effect.gen(function*() {
          const jobQueue = yield* JobQueue
          const jobId = newJobId("again")
          const consumer = yield* recordingConsumer("ai-interactive")
          yield* jobQueue.add({ queueName: "ai-interactive", payload: payload(jobId), priority: 0 })
          expect((yield* consumer.next).payload.jobId).toBe(jobId)
          yield* pollUntil(jobQueue.counts("ai-interactive"), (c) => c.waiting + c.active + c.delayed === 0)
          expect(yield* jobQueue.add({ queueName: "ai-interactive", payload: payload(jobId), priority: 0 })).toBe(
            "added"
          )
          expect((yield* consumer.next).payload.jobId).toBe(jobId)
        }))

      it.scoped("delivers by priority: 0 is the highest, 100 the lowest", () =>
        Effect.gen(function*() {
          const jobQueue = yield* JobQueue
          const low = newJobId("low")
          const mid = newJobId("mid")
          const high = newJobId("high")
          yield* jobQueue.add({ queueName: "ai-background", payload: payload(mid), priority: 50 })
          yield* jobQueue.add({ queueName: "ai-background", payload: payload(low), priority: 100 })
          yield* jobQueue.add({ queueName: "ai-background", payload: payload(high), priority: 0 })
          expect((yield* jobQueue.counts("ai-background")).waiting).toBe(3)
          const consumer = yield* recordingConsumer("ai-background", { concurrency: 1 })
          const order = [yield* consumer.next, yield* consumer.next, yield* consumer.next].map((d) => d.payload.jobId)
          expect(order).toEqual([high, mid, low])
        }))

      it.scoped("runs up to the consumer's concurrency at once", () =>
        Effect.gen(function*() {
          const jobQueue = yield* JobQueue
          const ids = [newJobId("conc"), newJobId("conc"), newJobId("conc"), newJobId("conc")]
          for (const jobId of ids) {
            yield* jobQueue.add({ queueName: "ai-interactive", payload: payload(jobId), priority: 5 })
          }
          const consumer = yield* recordingConsumer("ai-interactive", { concurrency: 2, holdMs: 300 })
          const seen = yield* Effect.forEach(ids, () => consumer.next)
          expect(
            new Set(seen.map((d) => d.payload.jobId))
          ).toEqual(new Set(ids))
          yield* pollUntil(jobQueue.counts("ai-interactive"), (c) => c.waiting + c.active + c.delayed === 0)
          expect(yield* Ref.get(consumer.maxInFlight)).toBe(2)
        }))

      it.scoped("a failed delivery is retried with the queue's attempts, then dropped", () =>
        Effect.gen(function*() {
          const jobQueue = yield* JobQueue
          const jobId = newJobId("fails")
          const consumer = yield* recordingConsumer("ai-interactive", { fail: (d) => d.payload.jobId === jobId })
          yield* jobQueue.add({ queueName: "ai-interactive", payload: payload(jobId), priority: 1 })
          const first = yield* consumer.next
          const second = yield* consumer.next
          expect([first.attempt, second.attempt]).toEqual([1, 2])
          yield* pollUntil(jobQueue.counts("ai-interactive"), (c) => c.waiting + c.active + c.delayed === 0)
          yield* Effect.sleep(Duration.millis(300))
          expect(yield* Queue.size(consumer.deliveries)).toBe(0)
        }))

      it.scoped("a delivery handed back by a stopping consumer waits again at once, its attempt not counted; that consumer takes no more", () =>
        Effect.gen(function*() {
          const jobQueue = yield* JobQueue
          const jobId = newJobId("handed-back")
          yield* jobQueue.add({ queueName: "ai-interactive", payload: payload(jobId), priority: 1 })
          // A rolling restart: the job reaches three stopping consumers in turn, more than its attempts.
          for (let stop = 0; stop < 3; stop++) {
            yield* Effect.scoped(
              Effect.gen(function*() {
                const stopping = yield* recordingConsumer("ai-interactive", { stopping: true })
                const refused = yield* stopping.next
                expect([refused.payload.jobId, refused.attempt]).toEqual([jobId, 1])
                // It is back at the front of the queue: a consumer still taking would have it again at once.
                yield* Effect.sleep(Duration.millis(300))
                expect(yield* Queue.size(stopping.deliveries)).toBe(0)
                expect((yield* jobQueue.state("ai-interactive", queueJobIdFor(jobId)))._tag).toBe("Waiting")
              })
            )
          }
          const consumer = yield* recordingConsumer("ai-interactive")
          const delivered = yield* consumer.next
          expect([delivered.payload.jobId, delivered.attempt]).toEqual([jobId, 1])
          yield* pollUntil(jobQueue.state("ai-interactive", queueJobIdFor(jobId)), (state) => state._tag === "Gone")
        }))

      it.scoped("a payload that does not decode is dropped and the consumer carries on", () =>
        Effect.gen(function*() {
          const jobQueue = yield* JobQueue
          const kit = yield* JobQueueTestKit
          const consumer = yield* recordingConsumer("ai-background", { concurrency: 1 })
          const poison = newJobId("poison")
          yield* kit.addRaw("ai-background", queueJobIdFor(poison), { jobId: poison, input: { secret: "x" } })
          yield* kit.addRaw("ai-background", queueJobIdFor(newJobId("poison")), "not even an object")
          const good = newJobId("after-poison")
          yield* jobQueue.add({ queueName: "ai-background", payload: payload(good), priority: 100 })
          expect((yield* consumer.next).payload.jobId).toBe(good)
          yield* pollUntil(jobQueue.counts("ai-background"), (c) => c.waiting + c.active + c.delayed === 0)
          expect(yield* Queue.size(consumer.deliveries)).toBe(0)
          // The poison's id is free again: the queue kept nothing of it.
          expect(yield* jobQueue.add({ queueName: "ai-background", payload: payload(poison), priority: 1 })).toBe(
            "added"
          )
          expect((yield* consumer.next).payload.jobId).toBe(poison)
        }))

      it.scoped("state: Waiting while waiting or delayed, Active since it was taken, Gone once finished or never added", () =>
        Effect.gen(function*() {
          const jobQueue = yield* JobQueue
          const waiting = newJobId("state-waiting")
          const delayed = newJobId("state-delayed")
          expect((yield* jobQueue.state("ai-background", queueJobIdFor(waiting)))._tag).toBe("Gone")
          yield* jobQueue.add({ queueName: "ai-background", payload: payload(waiting), priority: 10 })
          yield* jobQueue.add({
            queueName: "ai-background",
            payload: payload(delayed),
            priority: 10,
            delay: Duration.millis(1_500)
          })
          expect((yield* jobQueue.state("ai-background", queueJobIdFor(waiting)))._tag).toBe("Waiting")
          expect((yield* jobQueue.state("ai-background", queueJobIdFor(delayed)))._tag).toBe("Waiting")
          // Another queue does not hold it.
          expect((yield* jobQueue.state("ai-interactive", queueJobIdFor(waiting)))._tag).toBe("Gone")
          const before = Date.now()
          const consumer = yield* recordingConsumer("ai-background", { holdMs: 500 })
          expect((yield* consumer.next).payload.jobId).toBe(waiting)
          const active = yield* jobQueue.state("ai-background", queueJobIdFor(waiting))
          expect(active._tag).toBe("Active")
          if (active._tag === "Active") expect(Math.abs(active.activeSinceMs - before)).toBeLessThan(5_000)
          yield* pollUntil(jobQueue.state("ai-background", queueJobIdFor(waiting)), (state) => state._tag === "Gone")
          // Delivered after its delay, then finished: nothing is left behind for the next test.
          yield* pollUntil(jobQueue.state("ai-background", queueJobIdFor(delayed)), (state) => state._tag === "Gone")
        }))

      it.scoped("addBulk queues every job on its own queue, by priority and delay as add does; an id already waiting is left as it is", () =>
        Effect.gen(function*() {
          const jobQueue = yield* JobQueue
          const waitingAlready = newJobId("bulk-waiting")
          const low = newJobId("bulk-low")
          const high = newJobId("bulk-high")
          const interactive = newJobId("bulk-interactive")
          const delayed = newJobId("bulk-delayed")
          yield* jobQueue.add({
            queueName: "ai-background",
            payload: payload(waitingAlready, "first_type"),
            priority: 50
          })
          yield* jobQueue.addBulk([
            { queueName: "ai-background", payload: payload(low), priority: 100 },
            { queueName: "ai-background", payload: payload(waitingAlready, "second_type"), priority: 50 },
            { queueName: "ai-interactive", payload: payload(interactive), priority: 1 },
            { queueName: "ai-background", payload: payload(high), priority: 0 },
            { queueName: "ai-background", payload: payload(delayed), priority: 0, delay: Duration.millis(60_000) }
          ])
          expect(yield* jobQueue.counts("ai-background")).toEqual({ waiting: 3, active: 0, delayed: 1 })
          expect((yield* jobQueue.counts("ai-interactive")).waiting).toBe(1)
          const background = yield* recordingConsumer("ai-background", { concurrency: 1 })
          const order = [yield* background.next, yield* background.next, yield* background.next]
          expect(order.map((d) => d.payload.jobId)).toEqual([high, waitingAlready, low])
          // The job already waiting kept its own payload.
          expect(order[1]?.payload.jobType).toBe("first_type")
          const interactiveConsumer = yield* recordingConsumer("ai-interactive")
          expect((yield* interactiveConsumer.next).payload.jobId).toBe(interactive)
          expect(yield* jobQueue.state("ai-background", queueJobIdFor(delayed))).toEqual({ _tag: "Waiting" })
        }))

      it.scoped("a delayed add is not delivered before its delay", () =>
        Effect.gen(function*() {
          const jobQueue = yield* JobQueue
          const jobId = newJobId("delayed")
          yield* jobQueue.add({
            queueName: "ai-interactive",
            payload: payload(jobId),
            priority: 1,
            delay: Duration.millis(400)
          })
          expect((yield* jobQueue.counts("ai-interactive")).delayed).toBe(1)
          const consumer = yield* recordingConsumer("ai-interactive")
          yield* Effect.sleep(Duration.millis(150))
          expect(yield* Queue.size(consumer.deliveries)).toBe(0)
          expect((yield* consumer.next).payload.jobId).toBe(jobId)
        }))
    }
  )
