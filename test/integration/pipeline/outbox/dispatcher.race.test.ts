import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, HashMap, Layer, Ref } from "effect"
import { QueueSettings } from "../../../../src/config/QueueSettings.js"
import { BullMqJobQueueLive } from "../../../../src/layers/bullmq/BullMqJobQueue.js"
import { JobQueue } from "../../../../src/services/JobQueue.js"
import { OutboxRepository } from "../../../../src/services/outbox/OutboxRepository.js"
import { makeAddCounter, runDispatcher, waitUntil, writeEnqueueEvent } from "../../../support/dispatcherStack.js"
import { jobCreation, mysqlRepositories } from "../../../support/foundationStack.js"
import { testRedisLayer, uniqueRedisPrefix } from "../../../support/redis.js"

const prefix = uniqueRedisPrefix("dispatcher-race")
const redisKeys = testRedisLayer(prefix)
const freshRedis = Layer.fresh(testRedisLayer(prefix))

const base = Layer.mergeAll(
  BullMqJobQueueLive.pipe(Layer.provide(QueueSettings.make()), Layer.provideMerge(redisKeys)),
  jobCreation(mysqlRepositories("dispatcher_race")).pipe(Layer.orDie)
)

const total = 1_000

layer(base, { excludeTestServices: true, timeout: Duration.seconds(120) })(
  "two dispatchers racing (MariaDB + Redis)",
  (it) => {
    it.scoped(`${total} events: each published once, each job added to BullMQ once, none left behind`, () =>
      Effect.gen(function*() {
        const outbox = yield* OutboxRepository
        const jobQueue = yield* JobQueue
        const jobIds = yield* Effect.forEach(
          Array.from({ length: total }, (_, i) => i),
          (i) =>
            Effect.map(
              writeEnqueueEvent({ queueName: i % 2 === 0 ? "ai-interactive" : "ai-background" }),
              (e) => e.jobId
            ),
          { concurrency: 10 }
        )
        expect((yield* outbox.countByStatus).pending).toBe(total)

        // One counter for both: a job added twice, by either dispatcher, shows as 2.
        const counter = yield* makeAddCounter
        const settings = { batchSize: 25 }
        yield* Effect.all(
          [
            runDispatcher({ dispatcherId: "racer-a", redis: freshRedis, counter, settings }),
            runDispatcher({ dispatcherId: "racer-b", redis: freshRedis, counter, settings })
          ],
          { concurrency: 2 }
        )
        const counts = yield* waitUntil(outbox.countByStatus, (c) => c.published === total, {
          timeout: Duration.seconds(60),
          every: Duration.millis(100)
        })
        expect(counts).toEqual({ pending: 0, processing: 0, published: total, failed: 0, dead: 0 })

        const adds = yield* Ref.get(counter)
        expect(HashMap.size(adds)).toBe(total)
        expect([...HashMap.values(adds)].every((n) => n === 1)).toBe(true)
        expect(new Set(HashMap.keys(adds))).toEqual(new Set(jobIds))

        const interactive = yield* jobQueue.counts("ai-interactive")
        const background = yield* jobQueue.counts("ai-background")
        expect(interactive.waiting + background.waiting).toBe(total)
        expect(interactive.active + interactive.delayed + background.active + background.delayed).toBe(0)

        // Both took part: a race, not a relay.
        const sql = yield* SqlClient.SqlClient
        const byDispatcher = yield* sql<{ readonly lockedBy: string; readonly total: number }>`
        SELECT locked_by, COUNT(*) AS total FROM outbox_event GROUP BY locked_by`
        expect(byDispatcher.map((row) => row.lockedBy).sort()).toEqual(["racer-a", "racer-b"])
        expect(byDispatcher.reduce((sum, row) => sum + Number(row.total), 0)).toBe(total)
      }))
  }
)
