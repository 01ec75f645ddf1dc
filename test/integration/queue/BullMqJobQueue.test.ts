import { Queue } from "bullmq"
import { Duration, Effect, Layer } from "effect"
import { QueueSettings } from "../../../src/config/QueueSettings.js"
import { BullMqJobQueueLive } from "../../../src/layers/bullmq/BullMqJobQueue.js"
import { RedisConnection } from "../../../src/layers/redis/RedisConnection.js"
import { jobQueueContract, JobQueueTestKit } from "../../contract/JobQueue.contract.js"
import { testRedisLayer, uniqueRedisPrefix } from "../../support/redis.js"

const settings = QueueSettings.make({
  queues: {
    "ai-interactive": { backoffDelay: Duration.millis(50) },
    "ai-background": { backoffDelay: Duration.millis(50) }
  },
  shutdownGrace: Duration.millis(2_000)
})

const redis = testRedisLayer(uniqueRedisPrefix("bullmq-jobqueue"))

/** Raw BullMQ adds, bypassing the payload Schema (what a buggy or hostile producer could do). */
const kit = Layer.scoped(
  JobQueueTestKit,
  Effect.gen(function*() {
    const connection = yield* RedisConnection
    const raw = {
      "ai-interactive": new Queue("ai-interactive", { connection: connection.commands, prefix: connection.bullPrefix }),
      "ai-background": new Queue("ai-background", { connection: connection.commands, prefix: connection.bullPrefix })
    }
    yield* Effect.addFinalizer(() =>
      Effect.promise(() => Promise.all([raw["ai-interactive"].close(), raw["ai-background"].close()]))
    )
    return JobQueueTestKit.of({
      addRaw: (queueName, queueJobId, data) =>
        Effect.promise(() =>
          raw[queueName].add("raw", data, { jobId: queueJobId, removeOnComplete: true, removeOnFail: true })
        )
          .pipe(Effect.asVoid)
    })
  })
)

const layer = Layer.mergeAll(BullMqJobQueueLive, kit).pipe(Layer.provide(settings), Layer.provideMerge(redis))

jobQueueContract("BullMQ", layer)
