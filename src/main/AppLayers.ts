import { NodeContext } from "@effect/platform-node"
import { Effect, Layer, Option, Schema } from "effect"
import { DispatcherSettings } from "../config/DispatcherSettings.js"
import { QuotaLimitsConfig } from "../services/Quotas.js"
import { HttpConfig, ProviderConfig, StorageConfig, TimingConfig } from "../config/EngineConfig.js"
import { AiJobServiceLive } from "../services/AiJobServiceLive.js"
import { JobCatalogLive } from "../jobs/JobCatalogLive.js"
import { OutboxAdminLive } from "../services/OutboxAdminLive.js"
import { SnapshotBuilderLive } from "../services/SnapshotBuilderLive.js"
import { BullMqJobQueueLive } from "../layers/bullmq/BullMqJobQueue.js"
import { AiGatewayFromConfig, GatewayServicesLive } from "./GatewayLive.js"
import { InProcessCancelSignal } from "../layers/memory/InProcessCancelSignal.js"
import { InProcessDomainEvents } from "../layers/memory/InProcessDomainEvents.js"
import { InProcessOutboxSignal } from "../layers/memory/InProcessOutboxSignal.js"
import { MemoryAiJobLifecycleRepository } from "../layers/memory/MemoryAiJobLifecycleRepository.js"
import { MemoryArtifactRepository } from "../layers/memory/MemoryArtifactRepository.js"
import { MemoryCredentialRepository } from "../layers/memory/MemoryCredentialRepository.js"
import { type MemoryDatabase, MemoryDatabaseLive } from "../layers/memory/MemoryDatabase.js"
import { type MemoryJobQueueControl, MemoryJobQueueLive } from "../layers/memory/MemoryJobQueue.js"
import { MemoryOutboxRepository } from "../layers/memory/MemoryOutboxRepository.js"
import { MemoryProjectionStore } from "../layers/memory/MemoryProjectionStore.js"
import { MemoryQuotas } from "../layers/memory/MemoryQuotas.js"
import { MemorySnapshotRepository } from "../layers/memory/MemorySnapshotRepository.js"
import { MemoryUnitOfWork } from "../layers/memory/MemoryUnitOfWork.js"
import { MemoryUsageLogRepository } from "../layers/memory/MemoryUsageLogRepository.js"
import { MemoryWorkerDirectory } from "../layers/memory/MemoryWorkerDirectory.js"
import { MysqlCredentialRepository } from "../layers/mysql/CredentialRepository.js"
import { MysqlAiJobLifecycleRepository } from "../layers/mysql/MysqlAiJobLifecycleRepository.js"
import { MysqlArtifactRepository } from "../layers/mysql/MysqlArtifactRepository.js"
import { MysqlFromConfig } from "../layers/mysql/MysqlDatabase.js"
import { MysqlOutboxRepository } from "../layers/mysql/MysqlOutboxRepository.js"
import { MysqlProjectionStore } from "../layers/mysql/MysqlProjectionStore.js"
import { MysqlQuotas } from "../layers/mysql/MysqlQuotas.js"
import { MysqlSnapshotRepository } from "../layers/mysql/MysqlSnapshotRepository.js"
import { MysqlUnitOfWork } from "../layers/mysql/MysqlUnitOfWork.js"
import { MysqlUsageLogRepository } from "../layers/mysql/UsageLogRepository.js"
import { QueueSettings } from "../config/QueueSettings.js"
import { RedisCancelSignal } from "../layers/redis/RedisCancelSignal.js"
import { RedisConnection } from "../layers/redis/RedisConnection.js"
import { RedisOutboxSignal } from "../layers/redis/RedisOutboxSignal.js"
import { RedisWorkerDirectory } from "../layers/redis/RedisWorkerDirectory.js"
import { mysqlCheck } from "../layers/mysql/MysqlReadinessCheck.js"
import { redisCheck } from "../layers/redis/RedisReadinessCheck.js"
import { makeReadinessProbe, ReadinessProbe } from "../services/ReadinessProbe.js"
export { ReadinessProbeMemory } from "../layers/memory/MemoryReadinessProbe.js"

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

/** MySQL and Redis; needs `SqlClient` (one of its connections is held) and `RedisConnection`. */
export const ReadinessProbeLive = Layer.scoped(
  ReadinessProbe,
  Effect.gen(function* () {
    const database = yield* mysqlCheck
    const redis = yield* redisCheck
    return makeReadinessProbe([database, redis])
  })
)
