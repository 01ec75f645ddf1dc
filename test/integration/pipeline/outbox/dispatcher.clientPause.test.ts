import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Redacted } from "effect"
import { Redis } from "ioredis"
import { QueueSettings } from "../../../../src/config/QueueSettings.js"
import { BullMqJobQueueLive } from "../../../../src/layers/bullmq/BullMqJobQueue.js"
import { RedisConnection } from "../../../../src/layers/redis/RedisConnection.js"
import { JobQueue, queueJobIdFor } from "../../../../src/services/JobQueue.js"
import { OutboxRepository } from "../../../../src/services/outbox/OutboxRepository.js"
import { startRedisServer } from "../../../process/support/redisServer.js"
import { runDispatcher, waitUntil, writeEnqueueEvent } from "../../../support/dispatcherStack.js"
import { jobCreation, mysqlRepositories } from "../../../support/foundationStack.js"
import { uniqueRedisPrefix } from "../../../support/redis.js"

/**
 * Issue 18, defect 3: under `CLIENT PAUSE` a queue add times out, yet runs when Redis resumes.
 * The dispatcher asks whether the queue job exists before it counts a failure, so no event
 * ends `dead` while its job was delivered.
 */

const eventRow = (eventId: string) =>
  Effect.flatMap(OutboxRepository, (outbox) => outbox.findById(eventId)).pipe(Effect.map(Option.getOrThrow))

layer(jobCreation(mysqlRepositories("dispatcher_pause")).pipe(Layer.orDie), {
  excludeTestServices: true,
  timeout: Duration.seconds(60)
})(
  "OutboxDispatcher while Redis is paused",
  (it) => {
    it.scoped("adds that time out during CLIENT PAUSE and run on resume are published, never dead", () =>
      Effect.gen(function*() {
        const server = yield* startRedisServer({ name: "paused-redis" })
        const prefix = uniqueRedisPrefix("dispatcher-pause")
        const redis = RedisConnection.layer({ url: Redacted.make(server.url), prefix })
        yield* runDispatcher({
          dispatcherId: "pause-d",
          redis,
          addTimeoutMs: 500,
          // Without the check, two unanswered adds would make an event dead well within the pause.
          settings: { retryBaseDelay: Duration.millis(50), retryMaxDelay: Duration.millis(100), maxAttempts: 2 }
        })
        const observer = yield* Layer.build(
          BullMqJobQueueLive.pipe(Layer.provide(Layer.merge(redis, QueueSettings.make())))
        )
        const queue = Layer.succeedContext(observer)

        // Connected and dispatching before the pause.
        const warmUp = yield* writeEnqueueEvent()
        yield* waitUntil(eventRow(warmUp.eventId), (event) => event.status === "published")

        const admin = yield* Effect.acquireRelease(
          Effect.sync(() => new Redis(server.url, { maxRetriesPerRequest: 1 })),
          (client) => Effect.sync(() => client.disconnect())
        )
        yield* Effect.promise(() => admin.call("CLIENT", "PAUSE", "2000", "ALL"))
        const events = yield* Effect.forEach(Array.from({ length: 4 }), () => writeEnqueueEvent())

        const settled = yield* Effect.forEach(
          events,
          ({ eventId }) =>
            waitUntil(eventRow(eventId), (event) => event.status === "published" || event.status === "dead", {
              timeout: Duration.seconds(30)
            })
        )
        for (const [index, event] of settled.entries()) {
          const jobId = events[index]?.jobId ?? ""
          const onQueue = yield* Effect.flatMap(JobQueue, (q) => q.contains("ai-interactive", queueJobIdFor(jobId)))
            .pipe(
              Effect.provide(queue)
            )
          expect({ status: event.status, onQueue }).toEqual({ status: "published", onQueue: true })
        }
      }).pipe(Effect.orDie))
  }
)
