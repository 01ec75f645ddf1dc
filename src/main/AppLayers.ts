/**
 * The composition root: the one place that wires adapters (src/layers) to the engine's services,
 * the pipeline and the HTTP API. Each program in src/main picks a stack (live: MySQL + Redis;
 * embedded: in memory) and the parts it runs (API, dispatcher, worker with its reaper).
 */
import { HttpClient } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { type ConfigError, ConfigProvider, Effect, Layer, Option, Schema } from "effect"
import { ApiSettings } from "../config/ApiSettings.js"
import { AuthSettings } from "../config/AuthSettings.js"
import { CircuitBreakerSettings } from "../config/CircuitBreakerSettings.js"
import { DirectDispatchSettings } from "../config/DirectDispatchSettings.js"
import { DispatcherSettings } from "../config/DispatcherSettings.js"
import { HttpConfig, ProviderConfig, StorageConfig, TimingConfig } from "../config/EngineConfig.js"
import { domainEventsQueueConfig, EventDeliverySettings } from "../config/EventDeliverySettings.js"
import { GatewaySelection } from "../config/GatewaySelection.js"
import { MigrationSettings } from "../config/MigrationSettings.js"
import { ProviderLimitsConfig } from "../config/ProviderLimitsConfig.js"
import { ProviderSettings } from "../config/ProviderSettings.js"
import { QueueSettings } from "../config/QueueSettings.js"
import { QuotaLimitsConfig } from "../config/QuotaLimitsConfig.js"
import { WorkerSettings } from "../config/WorkerSettings.js"
import { nodeApiServer } from "../http/server.js"
import { BuiltinPromptTemplatesLive } from "../jobs/builtinPrompts.js"
import { JobCatalogLive } from "../jobs/JobCatalogLive.js"
import { makeDomainEventTarget } from "../layers/bullmq/BullMqDomainEventTarget.js"
import { BullMqJobQueueLive } from "../layers/bullmq/BullMqJobQueue.js"
import { OpenAiCompatibleGatewayLive } from "../layers/gateway/OpenAiCompatibleGateway.js"
import { SyntheticGatewayLive } from "../layers/gateway/SyntheticGateway.js"
import { InProcessCancelSignal } from "../layers/memory/InProcessCancelSignal.js"
import { InProcessJobEvents } from "../layers/memory/InProcessJobEvents.js"
import { InProcessOutboxSignal } from "../layers/memory/InProcessOutboxSignal.js"
import { MemoryAiJobLifecycleRepository } from "../layers/memory/MemoryAiJobLifecycleRepository.js"
import { MemoryArtifactRepository } from "../layers/memory/MemoryArtifactRepository.js"
import { MemoryBreakerStore, MemoryCircuitBreaker } from "../layers/memory/MemoryCircuitBreaker.js"
import { MemoryCredentialRepository } from "../layers/memory/MemoryCredentialRepository.js"
import { type MemoryDatabase, MemoryDatabaseLive } from "../layers/memory/MemoryDatabase.js"
import { type MemoryJobQueueControl, MemoryJobQueueLive } from "../layers/memory/MemoryJobQueue.js"
import { MemoryJobStatistics } from "../layers/memory/MemoryJobStatistics.js"
import { MemoryOutboxRepository } from "../layers/memory/MemoryOutboxRepository.js"
import { MemoryProjectionStore } from "../layers/memory/MemoryProjectionStore.js"
import { MemoryCapacityStore, MemoryProviderCapacity } from "../layers/memory/MemoryProviderCapacity.js"
import { MemoryQuotas } from "../layers/memory/MemoryQuotas.js"
import { ReadinessProbeMemory } from "../layers/memory/MemoryReadinessProbe.js"
import { MemorySnapshotRepository } from "../layers/memory/MemorySnapshotRepository.js"
import { MemoryUnitOfWork } from "../layers/memory/MemoryUnitOfWork.js"
import { MemoryUsageLogRepository } from "../layers/memory/MemoryUsageLogRepository.js"
import { MemoryWorkerDirectory } from "../layers/memory/MemoryWorkerDirectory.js"
import { runMigrations } from "../layers/mysql/migrate.js"
import { MysqlAiJobLifecycleRepository } from "../layers/mysql/MysqlAiJobLifecycleRepository.js"
import { MysqlArtifactRepository } from "../layers/mysql/MysqlArtifactRepository.js"
import { MysqlCredentialRepository } from "../layers/mysql/MysqlCredentialRepository.js"
import { MysqlFromConfig } from "../layers/mysql/MysqlDatabase.js"
import { MysqlJobStatistics } from "../layers/mysql/MysqlJobStatistics.js"
import { MysqlOutboxRepository } from "../layers/mysql/MysqlOutboxRepository.js"
import { MysqlProjectionStore } from "../layers/mysql/MysqlProjectionStore.js"
import { MysqlQuotas } from "../layers/mysql/MysqlQuotas.js"
import { mysqlCheck } from "../layers/mysql/MysqlReadinessCheck.js"
import { MysqlSnapshotRepository } from "../layers/mysql/MysqlSnapshotRepository.js"
import { MysqlUnitOfWork } from "../layers/mysql/MysqlUnitOfWork.js"
import { MysqlUsageLogRepository } from "../layers/mysql/MysqlUsageLogRepository.js"
import { RedisCancelSignal } from "../layers/redis/RedisCancelSignal.js"
import { RedisCircuitBreaker } from "../layers/redis/RedisCircuitBreaker.js"
import { RedisConnection } from "../layers/redis/RedisConnection.js"
import { RedisJobEvents } from "../layers/redis/RedisJobEvents.js"
import { RedisOutboxSignal } from "../layers/redis/RedisOutboxSignal.js"
import { RedisProviderCapacity } from "../layers/redis/RedisProviderCapacity.js"
import { redisCheck } from "../layers/redis/RedisReadinessCheck.js"
import { RedisWorkerDirectory } from "../layers/redis/RedisWorkerDirectory.js"
import { WebhookHttpClient, webhookTargetsFromConfig } from "../layers/webhook/StandardWebhookTarget.js"
import { OutboxDispatcherLive } from "../pipeline/outbox/dispatcher.js"
import { WorkerServiceLive } from "../pipeline/worker.js"
import { AiCostCalculator } from "../services/AiCostCalculator.js"
import { AiGateway } from "../services/AiGateway.js"
import { AiGatewayTelemetryLive } from "../services/AiGatewayTelemetry.js"
import { AiJobService } from "../services/AiJobService.js"
import { ContentSafety } from "../services/ContentSafety.js"
import { CredentialVault } from "../services/CredentialVault.js"
import type { JobQueue } from "../services/JobQueue.js"
import { ModelRouter } from "../services/ModelRouter.js"
import { EventTargets } from "../services/outbox/EventTargets.js"
import { OutboxAdmin } from "../services/outbox/OutboxAdmin.js"
import { OutboxDirectPublisher } from "../services/outbox/OutboxDirectPublisher.js"
import type { OutboxRepository } from "../services/outbox/OutboxRepository.js"
import { makeReadinessProbe, ReadinessProbe } from "../services/ReadinessProbe.js"
import { SnapshotBuilder } from "../services/SnapshotBuilder.js"
import { WorkerHeapGrowth } from "./heapGrowth.js"
export { ReadinessProbeMemory }

// ---- Configuration

/** Every configuration section, read from the environment. */
export const ConfigLive = Layer.mergeAll(
  StorageConfig.layer,
  TimingConfig.layer,
  ProviderConfig.layer,
  HttpConfig.layer,
  QuotaLimitsConfig.layer,
  QueueSettings.layer,
  DispatcherSettings.layer,
  ProviderLimitsConfig.layer,
  ProviderSettings.layer.pipe(Layer.provide(ProviderConfig.layer))
)

const Platform = Layer.merge(ConfigLive, NodeContext.layer)

// ---- Infrastructure: the ports with two backings

/** The services every infrastructure provides, whichever backs them. */
export type Infrastructure = Layer.Layer.Success<typeof MemoryInfrastructure> extends infer All
  ? Exclude<All, MemoryDatabase | MemoryJobQueueControl>
  : never

/** Start-up could not reach or configure the database or Redis. */
export class InfrastructureUnavailable
  extends Schema.TaggedError<InfrastructureUnavailable>()("InfrastructureUnavailable", {
    message: Schema.String
  })
{}

/**
 * Which infrastructure the configuration names: `live` (MySQL + Redis) when both `DATABASE_URL`
 * and `REDIS_URL` are set, `embedded` (in memory) when neither is; one without the other is a
 * configuration error, not a silent fallback.
 */
export const storageMode: Effect.Effect<"live" | "embedded", InfrastructureUnavailable | ConfigError.ConfigError> =
  Effect.gen(
    function*() {
      const storage = yield* StorageConfig.config
      const database = Option.isSome(storage.databaseUrl)
      const redis = Option.isSome(storage.redisUrl)
      if (database && redis) return "live" as const
      if (!database && !redis) return "embedded" as const
      return yield* new InfrastructureUnavailable({
        message: `${
          database ? "REDIS_URL" : "DATABASE_URL"
        } is not set: set both DATABASE_URL and REDIS_URL, or neither (embedded)`
      })
    }
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
      MemoryUsageLogRepository,
      MemoryJobStatistics
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
  InProcessJobEvents
)

/** The provider limiter of one process on its own memory store (`AI_RATE_LIMITS`; needs `ProviderLimitsConfig`). */
export const MemoryCapacity = MemoryProviderCapacity().pipe(Layer.provide(MemoryCapacityStore.layer))

/** The provider circuit breakers of one process on its own memory store (`AI_BREAKER_*`). */
export const MemoryBreakers = MemoryCircuitBreaker.pipe(
  Layer.provide(Layer.merge(MemoryBreakerStore.layer, CircuitBreakerSettings.layer))
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
  MysqlUsageLogRepository,
  MysqlJobStatistics
)

/** The repositories on MySQL (`DATABASE_URL`). */
export const MysqlStorage = MysqlRepositories.pipe(Layer.provideMerge(MysqlFromConfig))

/**
 * Production infrastructure: MySQL storage, BullMQ queues, Redis signals and the provider limiter
 * every worker shares through Redis (`REDIS_URL`; the limiter needs `ProviderLimitsConfig`).
 */
export const LiveInfrastructure = Layer.mergeAll(
  MysqlStorage,
  Layer.mergeAll(
    BullMqJobQueueLive,
    RedisOutboxSignal,
    RedisCancelSignal,
    RedisWorkerDirectory,
    RedisJobEvents,
    RedisProviderCapacity(),
    RedisCircuitBreaker.pipe(Layer.provide(CircuitBreakerSettings.layer))
  ).pipe(
    Layer.provideMerge(RedisConnection.fromConfig)
  )
)

/**
 * What a dispatcher alone needs on MySQL + Redis: the outbox, the queues and the wake-up signal
 * (no other repository, no cancel or worker-presence connection).
 */
export const DispatcherInfrastructure = Layer.mergeAll(
  MysqlOutboxRepository.pipe(Layer.provide(MysqlFromConfig)),
  // The connection itself too: the domain-events queue, when configured, is on it.
  Layer.mergeAll(BullMqJobQueueLive, RedisOutboxSignal).pipe(Layer.provideMerge(RedisConnection.fromConfig)),
  TimingConfig.layer,
  DispatcherSettings.layer
).pipe(Layer.provide(Layer.merge(StorageConfig.layer, QueueSettings.layer)))

// ---- The provider

/** The gateway `GatewaySelection` names, or the one the providers' keys imply. */
export const AiGatewayFromConfig = Layer.unwrapEffect(
  Effect.gen(function*() {
    const { kind } = yield* GatewaySelection
    const providers = yield* ProviderSettings
    const chosen = Option.getOrElse(
      kind,
      () => (ProviderSettings.anyKey(providers) ? "openai" as const : "synthetic" as const)
    )
    yield* Effect.logInfo("AI gateway selected").pipe(Effect.annotateLogs({ gateway: chosen }))
    return chosen === "openai" ? OpenAiCompatibleGatewayLive : SyntheticGatewayLive
  })
).pipe(Layer.provide(GatewaySelection.layer))

/**
 * Everything RESOLVE and EXECUTE need besides the gateway itself: ModelRouter, CredentialVault
 * (needs a `CredentialRepository`), ContentSafety, AiCostCalculator and the built-in PromptTemplates.
 * Needs `ProviderConfig`.
 */
export const GatewayServicesLive = Layer.mergeAll(
  ModelRouter.Default,
  ProviderSettings.layer,
  CredentialVault.Default,
  ContentSafety.Default,
  AiCostCalculator.Default,
  BuiltinPromptTemplatesLive
)

// ---- The engine's own services and the stacks

/**
 * The engine's own services over any infrastructure: job types, creation, the provider and its
 * helpers. `gateway` provides at least an `AiGateway` (what else it provides is kept: a test
 * provider's control).
 */
export const engineServices = <ROut, E, R>(gateway: Layer.Layer<ROut | AiGateway, E, R>) =>
  Layer.mergeAll(AiJobService.Default, OutboxAdmin.Default).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        JobCatalogLive,
        SnapshotBuilder.Default,
        GatewayServicesLive,
        instrumented(gateway),
        DirectDispatchLive
      )
    )
  )

/**
 * Provider calls carry no trace context (`traceparent`, `b3`): the provider takes no part in the
 * engine's traces, and the engine's span ids are none of its business.
 */
const withoutTraceHeaders = Layer.effect(
  AiGateway,
  Effect.map(AiGateway, (gateway) =>
    AiGateway.of({
      ...(gateway.settle === undefined ? {} : { settle: gateway.settle }),
      generate: (request) => Effect.locally(gateway.generate(request), HttpClient.currentTracerPropagation, false)
    }))
)

/** The gateway with every call traced (`provider.chat`) and measured, whichever provider it is. */
const instrumented = <ROut, E, R>(gateway: Layer.Layer<ROut | AiGateway, E, R>) =>
  AiGatewayTelemetryLive.pipe(
    Layer.provideMerge(withoutTraceHeaders),
    Layer.provideMerge(gateway),
    Layer.provide(AiCostCalculator.Default)
  )

/**
 * The creator queues its own jobs after commit; the dispatcher sweeps what it missed. With
 * `OUTBOX_DIRECT_PUBLISH=false` nothing is provided: creates leave every event to the dispatcher
 * and wake it, as `AiJobService` does without a publisher.
 */
export const DirectDispatchLive = Layer.unwrapEffect(
  Effect.map(
    DirectDispatchSettings.config,
    (settings): Layer.Layer<never, never, JobQueue | OutboxRepository> =>
      settings.enabled
        ? OutboxDirectPublisher.Default.pipe(Layer.provide(Layer.succeed(DirectDispatchSettings, settings)))
        : Layer.empty
  )
)

/** The engine's services with the provider `AI_GATEWAY` names. */
export const EngineServicesLive = engineServices(AiGatewayFromConfig)

/** The engine on MySQL + Redis, with its configuration and the Node platform. */
export const LiveStack = EngineServicesLive.pipe(Layer.provideMerge(LiveInfrastructure), Layer.provideMerge(Platform))

// Without a provider key the embedded engine runs the synthetic provider, which needs none;
// the placeholder only lets the platform-key credential resolve.
const syntheticProvider = ConfigProvider.fromMap(
  new Map([["AI_GATEWAY", "synthetic"], ["AI_API_KEY", "embedded-synthetic-provider-needs-no-key"]])
).pipe(ConfigProvider.orElse(() => ConfigProvider.fromEnv()))

/** The engine in memory, on the synthetic provider unless a provider key names a real one. */
export const EmbeddedStack = Layer.unwrapEffect(
  Effect.map(Effect.provide(ProviderSettings.load, ProviderConfig.layer), (providers) => {
    const stack = EngineServicesLive.pipe(
      Layer.provideMerge(Layer.mergeAll(MemoryInfrastructure, MemoryCapacity, MemoryBreakers)),
      Layer.provideMerge(Platform)
    )
    return ProviderSettings.anyKey(providers)
      ? stack
      : stack.pipe(Layer.provide(Layer.setConfigProvider(syntheticProvider)))
  })
)

// ---- Readiness

/** MySQL and Redis; needs `SqlClient` (one of its connections is held) and `RedisConnection`. */
export const ReadinessProbeLive = Layer.scoped(
  ReadinessProbe,
  Effect.gen(function*() {
    const database = yield* mysqlCheck
    const redis = yield* redisCheck
    return makeReadinessProbe([database, redis])
  })
)

// ---- The parts a program runs over a stack

/** The HTTP API on `PORT` (and `HOST`, when set); needs `ApiSettings` and a `ReadinessProbe` beside the stack. */
export const ApiPart = <E = never, R = never>(
  options: { readonly logRequests?: boolean; readonly sampleMetrics?: Effect.Effect<void, E, R> } = {}
) =>
  Layer.unwrapEffect(
    Effect.map(HttpConfig, (http) =>
      nodeApiServer({ port: http.port, host: Option.getOrUndefined(http.host), ...options }))
  )

/** The API's settings (bearer tokens, transport limits, live streams) and readiness on MySQL + Redis. */
export const LiveApiSupport = Layer.mergeAll(ApiSettings.layer, AuthSettings.layer, ReadinessProbeLive)

/**
 * Where jobs' ends are announced: `WEBHOOK_URL`'s endpoints and, with `DOMAIN_EVENTS_QUEUE`, that
 * queue on the engine's Redis (refused at start without one: the embedded engine has none).
 */
export const EventTargetsLive = Layer.scoped(
  EventTargets,
  Effect.gen(function*() {
    const webhooks = yield* webhookTargetsFromConfig
    const domainQueue = yield* domainEventsQueueConfig
    if (Option.isNone(domainQueue)) return webhooks
    const redis = yield* Effect.serviceOption(RedisConnection)
    if (Option.isNone(redis)) {
      return yield* new InfrastructureUnavailable({
        message: "DOMAIN_EVENTS_QUEUE needs REDIS_URL: the domain-events queue lives on Redis"
      })
    }
    const queue = yield* makeDomainEventTarget(domainQueue.value).pipe(
      Effect.provideService(RedisConnection, redis.value)
    )
    return [...webhooks, queue]
  })
).pipe(Layer.provide(WebhookHttpClient))

/**
 * The outbox dispatcher: its enqueue lane adds jobs to their queues, its notify lane delivers
 * jobs' terminal events to their targets (needs `TimingConfig`; Redis when it has a queue target).
 */
export const DispatcherPart = OutboxDispatcherLive.pipe(
  Layer.provide(Layer.merge(EventTargetsLive, EventDeliverySettings.layer))
)

/**
 * Workers on `WORKER_QUEUES`, with the lock reaper and snapshot cleanup beside them, in a process
 * whose heap follows `WORKER_HEAP_GROWTH_PERCENT`.
 */
export const WorkerPart = WorkerServiceLive.pipe(Layer.provide(WorkerHeapGrowth), Layer.provide(WorkerSettings.layer))

/** Applies pending migrations before anything else starts (`MIGRATE_ON_START`, default true). */
export const MigrationsOnStart = Layer.unwrapEffect(
  Effect.map(MigrationSettings, ({ migrateOnStart }) =>
    migrateOnStart
      ? Layer.effectDiscard(
        runMigrations.pipe(
          Effect.tap((applied) =>
            Effect.logInfo("migrations applied on start").pipe(Effect.annotateLogs({ applied: applied.length }))
          )
        )
      ).pipe(Layer.provide(Layer.merge(MysqlFromConfig, NodeContext.layer)), Layer.provide(StorageConfig.layer))
      : Layer.empty)
).pipe(Layer.provide(MigrationSettings.layer))
