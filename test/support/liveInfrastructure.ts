import { Layer } from "effect"
import { BullMqJobQueueLive } from "../../src/layers/bullmq/BullMqJobQueue.js"
import { RedisCancelSignal } from "../../src/layers/redis/RedisCancelSignal.js"
import { RedisJobEvents } from "../../src/layers/redis/RedisJobEvents.js"
import { RedisOutboxSignal } from "../../src/layers/redis/RedisOutboxSignal.js"
import { RedisWorkerDirectory } from "../../src/layers/redis/RedisWorkerDirectory.js"
import { MysqlRepositories } from "../../src/main/AppLayers.js"
import { testRedisLayer, uniqueRedisPrefix } from "./redis.js"
import { scratchMysqlLayer } from "./scratchDatabase.js"
/**
 * The production infrastructure for `memoryEngineStack({ infrastructure })`: every repository
 * on a migrated scratch MySQL database, BullMQ queues and Redis signals under a key prefix of
 * its own, so a test runs the whole engine on the real parts.
 */
export const mysqlRedisInfrastructure = (name: string) =>
  Layer.mergeAll(
    MysqlRepositories.pipe(Layer.provideMerge(scratchMysqlLayer(name, { maxConnections: 10 }))),
    Layer.mergeAll(BullMqJobQueueLive, RedisOutboxSignal, RedisCancelSignal, RedisWorkerDirectory, RedisJobEvents).pipe(
      Layer.provideMerge(testRedisLayer(uniqueRedisPrefix(name)))
    )
  ).pipe(Layer.orDie)
