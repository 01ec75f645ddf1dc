import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Exit, HashMap, Layer, Option, Ref, Scope } from "effect"
import { QueueSettings } from "../../../../src/config/QueueSettings.js"
import { newId } from "../../../../src/domain/Ids.js"
import { enqueueEventType } from "../../../../src/domain/OutboxEvent.js"
import { BullMqJobQueueLive } from "../../../../src/layers/bullmq/BullMqJobQueue.js"
import { InProcessOutboxSignal } from "../../../../src/layers/memory/InProcessOutboxSignal.js"
import { RedisConnection } from "../../../../src/layers/redis/RedisConnection.js"
import { RedisOutboxSignal } from "../../../../src/layers/redis/RedisOutboxSignal.js"
import { AiJobLifecycleRepository } from "../../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../../src/services/AiJobService.js"
import { JobQueue, queueJobIdFor } from "../../../../src/services/JobQueue.js"
import { OutboxAdmin } from "../../../../src/services/outbox/OutboxAdmin.js"
import { OutboxRepository } from "../../../../src/services/outbox/OutboxRepository.js"
import { UnitOfWork } from "../../../../src/services/UnitOfWork.js"
import { makeAddCounter, runDispatcher, waitUntil, writeEnqueueEvent } from "../../../support/dispatcherStack.js"
import { jobCreation, mysqlRepositories } from "../../../support/foundationStack.js"
import { deadRedisLayer, testRedisLayer, uniqueRedisPrefix } from "../../../support/redis.js"

const prefix = uniqueRedisPrefix("dispatcher-mysql")
/** One Redis namespace for the file (deleted at the end); each dispatcher opens its own connections. */
const redisKeys = testRedisLayer(prefix)
const freshRedis = Layer.fresh(testRedisLayer(prefix))

/** What the tests read the queues with: BullMQ on the file's namespace. */
const observer = BullMqJobQueueLive.pipe(Layer.provide(QueueSettings.make()), Layer.provideMerge(redisKeys))

const base = Layer.mergeAll(observer, jobCreation(mysqlRepositories("dispatcher")).pipe(Layer.orDie))

const eventRow = (eventId: string) =>
  Effect.flatMap(OutboxRepository, (outbox) => outbox.findById(eventId)).pipe(Effect.map(Option.getOrThrow))

const queuedCount = Effect.flatMap(JobQueue, (queue) => queue.counts("ai-interactive")).pipe(
  Effect.map((counts) => counts.waiting + counts.delayed + counts.active)
)

/** Removes the observer's view of everything queued so far, so each test starts from an empty queue. */
const drainQueue = Effect.gen(function*() {
  const queue = yield* JobQueue
  yield* Effect.scoped(
    Effect.gen(function*() {
      yield* queue.consume("ai-interactive", () => Effect.void, { concurrency: 8 })
      yield* queue.consume("ai-background", () => Effect.void, { concurrency: 8 })
      yield* waitUntil(
        Effect.zipWith(
          queue.counts("ai-interactive"),
          queue.counts("ai-background"),
          (a, b) => a.waiting + a.active + a.delayed + b.waiting + b.active + b.delayed
        ),
        (n) => n === 0
      )
    })
  )
})

layer(base, { excludeTestServices: true, timeout: Duration.seconds(120) })(
  "OutboxDispatcher on MariaDB + Redis",
  (it) => {
    it.scoped("an event written in a transaction that rolls back is never dispatched", () =>
      Effect.gen(function*() {
        yield* drainQueue
        const unitOfWork = yield* UnitOfWork
        const outbox = yield* OutboxRepository
        const before = yield* outbox.countByStatus
        const jobId = yield* newId
        const eventId = yield* newId
        yield* runDispatcher({ dispatcherId: "rollback-d", redis: freshRedis })
        const failed = yield* unitOfWork.transaction(
          Effect.gen(function*() {
            yield* outbox.createInTransaction({
              id: eventId,
              eventType: enqueueEventType,
              aggregateType: "AiJob",
              aggregateId: jobId,
              dedupeKey: `${enqueueEventType}:${jobId}`,
              payload: { jobId, jobType: "synthetic_echo", queueName: "ai-interactive", priority: 50 },
              delay: Duration.zero
            })
            return yield* Effect.fail("refused after the insert" as const)
          })
        ).pipe(Effect.exit)
        expect(Exit.isFailure(failed)).toBe(true)
        yield* Effect.sleep(Duration.millis(500))
        expect(yield* outbox.findById(eventId)).toEqual(Option.none())
        expect(yield* outbox.countByStatus).toEqual(before)
        expect(yield* queuedCount).toBe(0)
      }))

    it.scoped("a created job is in BullMQ at once, woken across processes by Redis pub/sub (polling off)", () =>
      Effect.gen(function*() {
        yield* drainQueue
        // The dispatcher polls once a minute: only the pub/sub signal can wake it in time.
        const dispatcherScope = yield* Scope.make()
        yield* runDispatcher({
          dispatcherId: "pubsub-d",
          redis: freshRedis,
          timing: { outboxPollInterval: Duration.millis(60_000) },
          signal: RedisOutboxSignal.pipe(Layer.provide(freshRedis))
        }).pipe(Scope.extend(dispatcherScope))
        // Let the first (empty) poll pass, so the dispatcher is asleep when the job is created.
        yield* Effect.sleep(Duration.millis(200))
        // Another "process": its own Redis connections and signal, creating the job.
        const created = yield* Effect.flatMap(AiJobService, (service) =>
          service.createJob({
            userId: "u1",
            jobType: "synthetic_echo",
            targetType: "deck",
            targetId: "d1",
            input: { message: "hi" }
          })).pipe(Effect.provide(AiJobServiceWithRedisSignal))
        // Well inside the minute's poll, so only the signal can have woken it, with room for a loaded machine.
        yield* waitUntil(queuedCount, (n) => n === 1, { timeout: Duration.seconds(20) })
        yield* Scope.close(dispatcherScope, Exit.void)
        const events = yield* Effect.flatMap(OutboxRepository, (outbox) => outbox.countByStatus)
        expect(events.pending).toBe(0)
        expect(events.processing).toBe(0)
        expect(created.created).toBe(true)
      }))

    it.scoped("a dispatcher that died after its claim: dispatched again after the (short) lock TTL, queued once", () =>
      Effect.gen(function*() {
        yield* drainQueue
        const outbox = yield* OutboxRepository
        const counter = yield* makeAddCounter
        const { eventId, jobId } = yield* writeEnqueueEvent()
        const claimed = yield* outbox.claimBatch("dispatcher-that-died", 1_000)
        expect(claimed.map((event) => event.id)).toContain(eventId)

        yield* runDispatcher({
          dispatcherId: "survivor-d",
          redis: freshRedis,
          counter,
          timing: { outboxLockTtl: Duration.millis(800) },
          settings: { releaseInterval: Duration.millis(200) }
        })
        yield* Effect.sleep(Duration.millis(300))
        expect((yield* eventRow(eventId)).status).toBe("processing")
        expect(yield* queuedCount).toBe(0)

        const published = yield* waitUntil(eventRow(eventId), (event) => event.status === "published")
        expect(published.lockedBy).toBe("survivor-d")
        expect(yield* queuedCount).toBe(1)
        expect(HashMap.get(yield* Ref.get(counter), jobId)).toEqual(Option.some(1))
      }))

    it.scoped("Redis unreachable: attempts accumulate, nothing is lost; once Redis answers the event is delivered", () =>
      Effect.gen(function*() {
        yield* drainQueue
        const { eventId } = yield* writeEnqueueEvent()
        const down = yield* Scope.make()
        yield* runDispatcher({
          dispatcherId: "unreachable-d",
          redis: deadRedisLayer(prefix),
          addTimeoutMs: 300,
          settings: { retryBaseDelay: Duration.millis(1_500) }
        }).pipe(Scope.extend(down))
        const retrying = yield* waitUntil(eventRow(eventId), (event) => event.attemptCount === 1)
        expect(retrying.status).toBe("pending")
        expect(retrying.lastError).toContain("JobQueueUnavailable")
        // Shutting down while Redis is away is quick: adds are bounded by their timeout.
        yield* Scope.close(down, Exit.void).pipe(
          Effect.timeoutFail({ duration: Duration.seconds(5), onTimeout: () => "slow close" })
        )
        expect(yield* queuedCount).toBe(0)

        // Redis answers again (a dispatcher that can reach it): delivered after the backoff.
        yield* runDispatcher({ dispatcherId: "recovered-d", redis: freshRedis })
        const delivered = yield* waitUntil(eventRow(eventId), (event) => event.status === "published")
        expect(delivered.attemptCount).toBe(1)
        expect(yield* queuedCount).toBe(1)
      }))

    it.scoped("Redis unreachable: dead at the third failure, visible in the counts; a replay delivers it", () =>
      Effect.gen(function*() {
        yield* drainQueue
        const admin = yield* OutboxAdmin
        const before = yield* admin.counts
        const { eventId } = yield* writeEnqueueEvent()
        const down = yield* Scope.make()
        yield* runDispatcher({
          dispatcherId: "doomed-d",
          redis: deadRedisLayer(prefix),
          addTimeoutMs: 200,
          settings: { retryBaseDelay: Duration.millis(50) }
        }).pipe(Scope.extend(down))
        const dead = yield* waitUntil(eventRow(eventId), (event) => event.status === "dead")
        expect(dead.attemptCount).toBe(3)
        expect((yield* admin.counts).dead).toBe(before.dead + 1)
        yield* Scope.close(down, Exit.void)

        yield* runDispatcher({ dispatcherId: "replay-d", redis: freshRedis })
        yield* Effect.sleep(Duration.millis(300))
        expect((yield* eventRow(eventId)).status).toBe("dead")
        const replayed = yield* admin.replayDead(eventId)
        expect(replayed.attemptCount).toBe(0)
        const delivered = yield* waitUntil(eventRow(eventId), (event) => event.status === "published")
        expect(delivered.attemptCount).toBe(0)
        expect(yield* queuedCount).toBe(1)
        expect((yield* admin.counts).dead).toBe(before.dead)
      }).pipe(Effect.provide(OutboxAdmin.Default.pipe(Layer.provide(InProcessOutboxSignal)))))

    it.scoped("an unknown event_type is marked published and nothing is queued", () =>
      Effect.gen(function*() {
        yield* drainQueue
        const { eventId } = yield* writeEnqueueEvent({ eventType: "ai.job.completed", payload: { jobId: "x" } })
        yield* runDispatcher({ dispatcherId: "unknown-d", redis: freshRedis })
        const event = yield* waitUntil(eventRow(eventId), (e) => e.status === "published")
        expect(event.attemptCount).toBe(0)
        yield* Effect.sleep(Duration.millis(200))
        expect(yield* queuedCount).toBe(0)
      }))

    it.scoped("a BullMQ payload that does not decode is rejected, the worker survives, the job row is left for the reaper", () =>
      Effect.gen(function*() {
        yield* drainQueue
        const redis = yield* RedisConnection
        const jobs = yield* AiJobLifecycleRepository
        const outbox = yield* OutboxRepository
        const service = yield* AiJobService
        const jobQueue = yield* JobQueue
        const poisoned = (yield* service.createJob({
          userId: "u2",
          jobType: "synthetic_echo",
          targetType: "deck",
          targetId: "d2",
          input: { message: "poisoned" }
        })).job
        // Its event went out earlier; what sits in Redis now is garbage under its id.
        for (const event of yield* outbox.claimBatch("earlier-d", 1_000)) {
          yield* outbox.markPublishedMany([event.id], "earlier-d")
        }
        yield* Effect.promise(() =>
          import("bullmq").then(({ Queue }) => {
            const raw = new Queue("ai-interactive", { connection: redis.commands, prefix: redis.bullPrefix })
            return raw
              .add("raw", { jobId: poisoned.id, createdAt: 12 }, {
                jobId: queueJobIdFor(poisoned.id),
                removeOnFail: true
              })
              .then(() => raw.close())
          })
        )
        const handled = yield* Ref.make<ReadonlyArray<string>>([])
        yield* jobQueue.consume(
          "ai-interactive",
          (delivery) => Ref.update(handled, (all) => [...all, delivery.payload.jobId])
        )
        yield* waitUntil(queuedCount, (n) => n === 0)

        yield* runDispatcher({ dispatcherId: "after-poison-d", redis: freshRedis })
        const healthy = (yield* service.createJob({
          userId: "u2",
          jobType: "synthetic_echo",
          targetType: "deck",
          targetId: "d2",
          input: { message: "healthy" }
        })).job
        yield* waitUntil(Ref.get(handled), (all) => all.includes(healthy.id))
        expect(yield* Ref.get(handled)).toEqual([healthy.id])
        const row = Option.getOrThrow(yield* jobs.findById(poisoned.id))
        expect(row.lifecycleStatus).toBe("queued")
      }))
  }
)

/** AiJobService whose signal goes over Redis, as in an API process (its own connections). */
const AiJobServiceWithRedisSignal = AiJobService.Default.pipe(
  Layer.provide(RedisOutboxSignal.pipe(Layer.provide(freshRedis)))
)
