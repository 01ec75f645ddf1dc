import { Layer } from "effect"
import { CircuitBreakerSettings } from "../../../src/config/CircuitBreakerSettings.js"
import { ProviderConfig, TimingConfig } from "../../../src/config/EngineConfig.js"
import { QueueSettings } from "../../../src/config/QueueSettings.js"
import type { QuotaLimits } from "../../../src/config/QuotaLimitsConfig.js"
import { JobCatalogLive } from "../../../src/jobs/JobCatalogLive.js"
import { BullMqJobQueueLive } from "../../../src/layers/bullmq/BullMqJobQueue.js"
import { MysqlArtifactRepository } from "../../../src/layers/mysql/MysqlArtifactRepository.js"
import { MysqlCredentialRepository } from "../../../src/layers/mysql/MysqlCredentialRepository.js"
import { MysqlJobStatistics } from "../../../src/layers/mysql/MysqlJobStatistics.js"
import { MysqlProjectionStore } from "../../../src/layers/mysql/MysqlProjectionStore.js"
import { MysqlUsageLogRepository } from "../../../src/layers/mysql/MysqlUsageLogRepository.js"
import { RedisCancelSignal } from "../../../src/layers/redis/RedisCancelSignal.js"
import { RedisCircuitBreaker } from "../../../src/layers/redis/RedisCircuitBreaker.js"
import { RedisJobEvents } from "../../../src/layers/redis/RedisJobEvents.js"
import { RedisOutboxSignal } from "../../../src/layers/redis/RedisOutboxSignal.js"
import { RedisWorkerDirectory } from "../../../src/layers/redis/RedisWorkerDirectory.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { ModelRouter } from "../../../src/services/ModelRouter.js"
import { OutboxAdmin } from "../../../src/services/outbox/OutboxAdmin.js"
import { SnapshotBuilder } from "../../../src/services/SnapshotBuilder.js"
import { mysqlRepositories } from "../../support/foundationStack.js"
import { testRedisLayer, uniqueRedisPrefix } from "../../support/redis.js"
import type { ScratchClientOptions } from "../../support/scratchDatabase.js"
import { testVault } from "./harness.js"

/**
 * Every engine service the API needs on a migrated scratch MySQL database and the test Redis
 * (its own key prefix), plus `SqlClient` and `RedisConnection` for the readiness probe.
 */
export const mysqlEngine = (name: string, limits: Partial<QuotaLimits> = {}, client: ScratchClientOptions = {}) => {
  const repositories = mysqlRepositories(
    name,
    { maxActiveJobsPerUser: 10_000, dailyJobQuota: 10_000, ...limits },
    client
  )
  const redis = testRedisLayer(uniqueRedisPrefix(name))
  const stores = Layer.mergeAll(
    MysqlProjectionStore,
    MysqlArtifactRepository,
    MysqlCredentialRepository,
    MysqlUsageLogRepository,
    MysqlJobStatistics,
    SnapshotBuilder.Default.pipe(Layer.provide(TimingConfig.make()))
  ).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        RedisOutboxSignal,
        RedisCancelSignal,
        RedisWorkerDirectory,
        RedisJobEvents,
        RedisCircuitBreaker.pipe(Layer.provide(CircuitBreakerSettings.make())),
        BullMqJobQueueLive.pipe(Layer.provide(QueueSettings.make()))
      ).pipe(Layer.provideMerge(redis))
    ),
    Layer.provideMerge(repositories)
  )
  return Layer.mergeAll(
    AiJobService.Default,
    OutboxAdmin.Default,
    testVault,
    ModelRouter.Default.pipe(Layer.provide(ProviderConfig.layer))
  ).pipe(
    Layer.provideMerge(JobCatalogLive.pipe(Layer.provideMerge(stores)))
  )
}
