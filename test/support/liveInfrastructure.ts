import { Layer } from "effect"
import { BullMqJobQueueLive } from "../../src/layers/bullmq/BullMqJobQueue.js"
import { InProcessDomainEvents } from "../../src/layers/memory/InProcessDomainEvents.js"
import { MysqlCredentialRepository } from "../../src/layers/mysql/CredentialRepository.js"
import { MysqlAiJobLifecycleRepository } from "../../src/layers/mysql/MysqlAiJobLifecycleRepository.js"
import { MysqlArtifactRepository } from "../../src/layers/mysql/MysqlArtifactRepository.js"
import { MysqlOutboxRepository } from "../../src/layers/mysql/MysqlOutboxRepository.js"
import { MysqlProjectionStore } from "../../src/layers/mysql/MysqlProjectionStore.js"
import { MysqlQuotas } from "../../src/layers/mysql/MysqlQuotas.js"
import { MysqlSnapshotRepository } from "../../src/layers/mysql/MysqlSnapshotRepository.js"
import { MysqlUnitOfWork } from "../../src/layers/mysql/MysqlUnitOfWork.js"
import { MysqlUsageLogRepository } from "../../src/layers/mysql/UsageLogRepository.js"
import { RedisCancelSignal } from "../../src/layers/redis/RedisCancelSignal.js"
import { RedisOutboxSignal } from "../../src/layers/redis/RedisOutboxSignal.js"
import { RedisWorkerDirectory } from "../../src/layers/redis/RedisWorkerDirectory.js"
import { testRedisLayer, uniqueRedisPrefix } from "./redis.js"
import { scratchMysqlLayer } from "./scratchDatabase.js"

/**
 * The production infrastructure for `memoryEngineStack({ infrastructure })`: every repository
 * on a migrated scratch MySQL database, BullMQ queues and Redis signals under a key prefix of
 * its own, so a test runs the whole engine on the real parts.
 */
export const mysqlRedisInfrastructure = (name: string) =>
  Layer.mergeAll(
    Layer.mergeAll(
      MysqlAiJobLifecycleRepository,
      MysqlOutboxRepository,
      MysqlSnapshotRepository,
      MysqlUnitOfWork,
      MysqlQuotas,
      MysqlArtifactRepository,
      MysqlProjectionStore,
      MysqlCredentialRepository,
      MysqlUsageLogRepository
    ).pipe(Layer.provideMerge(scratchMysqlLayer(name, { maxConnections: 10 }))),
    Layer.mergeAll(BullMqJobQueueLive, RedisOutboxSignal, RedisCancelSignal, RedisWorkerDirectory).pipe(
      Layer.provideMerge(testRedisLayer(uniqueRedisPrefix(name)))
    ),
    InProcessDomainEvents
  ).pipe(Layer.orDie)
