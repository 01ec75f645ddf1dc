import { NodeContext } from "@effect/platform-node"
import { Effect, Layer, Option, Schema } from "effect"
import { DispatcherSettings } from "../pipeline/dispatcher.js"
import { QuotaLimitsConfig } from "../services/Quotas.js"
import { HttpConfig, ProviderConfig, StorageConfig, TimingConfig } from "./config.js"
import { AiJobServiceLive } from "./core/AiJobServiceLive.js"
import { JobCatalogLive } from "./core/JobCatalogLive.js"
import { OutboxAdminLive } from "./core/OutboxAdminLive.js"
import { SnapshotBuilderLive } from "./core/SnapshotBuilderLive.js"
import { BullMqJobQueueLive } from "./bullmq/BullMqJobQueue.js"
import { AiGatewayFromConfig, GatewayServicesLive } from "./gateway/GatewayLive.js"
import { InProcessCancelSignal } from "./memory/InProcessCancelSignal.js"
import { InProcessDomainEvents } from "./memory/InProcessDomainEvents.js"
import { InProcessOutboxSignal } from "./memory/InProcessOutboxSignal.js"
import { MemoryAiJobLifecycleRepository } from "./memory/MemoryAiJobLifecycleRepository.js"
import { MemoryArtifactRepository } from "./memory/MemoryArtifactRepository.js"
import { MemoryCredentialRepository } from "./memory/MemoryCredentialRepository.js"
import { type MemoryDatabase, MemoryDatabaseLive } from "./memory/MemoryDatabase.js"
import { type MemoryJobQueueControl, MemoryJobQueueLive } from "./memory/MemoryJobQueue.js"
import { MemoryOutboxRepository } from "./memory/MemoryOutboxRepository.js"
import { MemoryProjectionStore } from "./memory/MemoryProjectionStore.js"
import { MemoryQuotas } from "./memory/MemoryQuotas.js"
import { MemorySnapshotRepository } from "./memory/MemorySnapshotRepository.js"
import { MemoryUnitOfWork } from "./memory/MemoryUnitOfWork.js"
import { MemoryUsageLogRepository } from "./memory/MemoryUsageLogRepository.js"
import { MemoryWorkerDirectory } from "./memory/MemoryWorkerDirectory.js"
import { MysqlCredentialRepository } from "./mysql/CredentialRepository.js"
import { MysqlAiJobLifecycleRepository } from "./mysql/MysqlAiJobLifecycleRepository.js"
import { MysqlArtifactRepository } from "./mysql/MysqlArtifactRepository.js"
import { MysqlFromConfig } from "./mysql/MysqlDatabase.js"
import { MysqlOutboxRepository } from "./mysql/MysqlOutboxRepository.js"
import { MysqlProjectionStore } from "./mysql/MysqlProjectionStore.js"
import { MysqlQuotas } from "./mysql/MysqlQuotas.js"
import { MysqlSnapshotRepository } from "./mysql/MysqlSnapshotRepository.js"
import { MysqlUnitOfWork } from "./mysql/MysqlUnitOfWork.js"
import { MysqlUsageLogRepository } from "./mysql/UsageLogRepository.js"
import { QueueSettings } from "./queueSettings.js"
import { RedisCancelSignal } from "./redis/RedisCancelSignal.js"
import { RedisConnection } from "./redis/RedisConnection.js"
import { RedisOutboxSignal } from "./redis/RedisOutboxSignal.js"
import { RedisWorkerDirectory } from "./redis/RedisWorkerDirectory.js"

/** The services every infrastructure provides, whichever backs them. */
export type Infrastructure = Layer.Layer.Success<typeof MemoryInfrastructure> extends infer All
  ? Exclude<All, MemoryDatabase | MemoryJobQueueControl>
  : never

/** Start-up could not reach or configure the database or Redis. */
export class InfrastructureUnavailable extends Schema.TaggedError<InfrastructureUnavailable>()("InfrastructureUnavailable", {
  message: Schema.String
}) {}

/** Every configuration section, read from the environment. */
export const ConfigLive = Layer.mergeAll(
  StorageConfig.layer,
  TimingConfig.layer,
  ProviderConfig.layer,
  HttpConfig.layer,
  QuotaLimitsConfig.layer,
  QueueSettings.layer,
  DispatcherSettings.layer
)

/** The repositories on the in-memory database (needs `QuotaLimitsConfig`). */
export const MemoryStorage = MemoryQuotas.pipe(
  Layer.provideMerge(
    Layer.mergeAll(
      MemoryAiJobLifecycleRepository,
      MemoryOutboxRepository,
      MemorySnapshotRepository,
      MemoryUnitOfWork,
      MemoryArtifactRepository,
      MemoryProjectionStore,
      MemoryCredentialRepository,
      MemoryUsageLogRepository
    )
  ),
  Layer.provideMerge(MemoryDatabaseLive)
)

/** The embedded engine's infrastructure: memory storage, an in-memory queue and in-process signals. */
export const MemoryInfrastructure = Layer.mergeAll(
  MemoryStorage,
  MemoryJobQueueLive,
  InProcessOutboxSignal,
  InProcessCancelSignal,
  MemoryWorkerDirectory,
  InProcessDomainEvents
)

/** Every repository on MySQL, over whatever `SqlClient` it is given. */
export const MysqlRepositories = Layer.mergeAll(
  MysqlAiJobLifecycleRepository,
  MysqlOutboxRepository,
  MysqlSnapshotRepository,
  MysqlUnitOfWork,
  MysqlQuotas,
  MysqlArtifactRepository,
  MysqlProjectionStore,
  MysqlCredentialRepository,
  MysqlUsageLogRepository
)

/** The repositories on MySQL (`DATABASE_URL`). */
export const MysqlStorage = MysqlRepositories.pipe(Layer.provideMerge(MysqlFromConfig))

/** Production infrastructure: MySQL storage, BullMQ queues and Redis signals (`REDIS_URL`). */
export const LiveInfrastructure = Layer.mergeAll(
  MysqlStorage,
  Layer.mergeAll(BullMqJobQueueLive, RedisOutboxSignal, RedisCancelSignal, RedisWorkerDirectory).pipe(
    Layer.provideMerge(RedisConnection.fromConfig)
  ),
  InProcessDomainEvents
)

/**
 * MySQL + Redis when both `DATABASE_URL` and `REDIS_URL` are set, the embedded memory engine
 * when neither is; one without the other is a configuration error, not a silent fallback.
 */
export const InfrastructureFromConfig: Layer.Layer<
  Infrastructure,
  InfrastructureUnavailable,
  StorageConfig | QuotaLimitsConfig | QueueSettings
> = Layer.unwrapEffect(
  Effect.gen(function* () {
    const storage = yield* StorageConfig
    const database = Option.isSome(storage.databaseUrl)
    const redis = Option.isSome(storage.redisUrl)
    const live: Layer.Layer<Infrastructure, InfrastructureUnavailable, StorageConfig | QuotaLimitsConfig | QueueSettings> =
      LiveInfrastructure.pipe(Layer.mapError((error) => new InfrastructureUnavailable({ message: error.message })))
    const memory: Layer.Layer<Infrastructure, never, QuotaLimitsConfig | QueueSettings> = MemoryInfrastructure
    if (database && redis) return live
    if (!database && !redis) return memory
    return Layer.fail(
      new InfrastructureUnavailable({
        message: `${database ? "REDIS_URL" : "DATABASE_URL"} is not set: set both DATABASE_URL and REDIS_URL, or neither (embedded)`
      })
    )
  })
)

/** The engine's own services over any infrastructure: job types, creation, the gateway. */
export const EngineServicesLive = Layer.mergeAll(AiJobServiceLive, OutboxAdminLive).pipe(
  Layer.provideMerge(Layer.mergeAll(JobCatalogLive, SnapshotBuilderLive, GatewayServicesLive, AiGatewayFromConfig))
)

/** Everything a process needs, from configuration: services over the infrastructure it names. */
export const AppLive = EngineServicesLive.pipe(
  Layer.provideMerge(InfrastructureFromConfig),
  Layer.provideMerge(Layer.merge(ConfigLive, NodeContext.layer))
)
