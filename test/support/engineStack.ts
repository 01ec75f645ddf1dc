import { Effect, Layer, Option, Redacted, TestClock } from "effect"
import { DispatcherSettings } from "../../src/config/DispatcherSettings.js"
import { ProviderConfig, TimingConfig } from "../../src/config/EngineConfig.js"
import { type ProviderLimit, ProviderLimitsConfig } from "../../src/config/ProviderLimitsConfig.js"
import { ProviderSettings } from "../../src/config/ProviderSettings.js"
import { QueueSettings } from "../../src/config/QueueSettings.js"
import { QuotaLimitsConfig } from "../../src/config/QuotaLimitsConfig.js"
import type { LifecycleStatus } from "../../src/domain/LifecycleStatus.js"
import { allQueueNames } from "../../src/domain/QueueName.js"
import { jobCatalog } from "../../src/jobs/catalog.js"
import { jobCatalogLayer } from "../../src/jobs/JobCatalogLive.js"
import type { JobTypeModule } from "../../src/jobs/JobTypeModule.js"
import { SyntheticGatewayLayer } from "../../src/layers/gateway/SyntheticGateway.js"
import { type Infrastructure, MemoryBreakers, MemoryCapacity, MemoryInfrastructure } from "../../src/main/AppLayers.js"
import { makeDispatcher } from "../../src/pipeline/outbox/dispatcher.js"
import { runWorker } from "../../src/pipeline/worker.js"
import { AiCostCalculator } from "../../src/services/AiCostCalculator.js"
import type { AiGateway } from "../../src/services/AiGateway.js"
import { AiJobLifecycleRepository } from "../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../src/services/AiJobService.js"
import { ContentSafety } from "../../src/services/ContentSafety.js"
import { CredentialVault } from "../../src/services/CredentialVault.js"
import { JobDefinitionRegistry } from "../../src/services/JobDefinitionRegistry.js"
import { ModelRouter } from "../../src/services/ModelRouter.js"
import { OutboxAdmin } from "../../src/services/outbox/OutboxAdmin.js"
import { PromptTemplates } from "../../src/services/PromptTemplates.js"
import type { ProviderCapacity } from "../../src/services/ProviderCapacity.js"
import type { ProviderCircuitBreaker } from "../../src/services/ProviderCircuitBreaker.js"
import { ResultProjectors } from "../../src/services/ResultProjectors.js"
import { SnapshotBuilder } from "../../src/services/SnapshotBuilder.js"

export const testPlatformKey = "sk-engine-test-platform-key"

/**
 * The whole engine on memory layers and the synthetic provider, for TestClock tests: job types,
 * creation, gateway services and infrastructure. Fresh per use.
 */
export const memoryEngineStack = (options: {
  readonly timing?: Partial<TimingConfig["Type"]>
  readonly modules?: ReadonlyArray<JobTypeModule>
  readonly seed?: string
  /** The provider; the synthetic one (with its control) by default. */
  readonly gateway?: Layer.Layer<AiGateway>
  /** How inputs are frozen into snapshots; the engine's redaction by default. */
  readonly snapshotBuilder?: Layer.Layer<SnapshotBuilder, never, TimingConfig>
  /** Storage, queue and signals; the in-memory ones by default. */
  readonly infrastructure?: Layer.Layer<Infrastructure, never, QuotaLimitsConfig | QueueSettings>
  /** The provider limiter; a memory one of its own by default, under `limits` (none by default). */
  readonly capacity?: Layer.Layer<ProviderCapacity, never, ProviderLimitsConfig>
  readonly limits?: Readonly<Record<string, ProviderLimit>>
  /** The provider circuit breakers; a memory one of its own by default. */
  readonly breaker?: Layer.Layer<ProviderCircuitBreaker>
} = {}) => {
  const modules = options.modules ?? jobCatalog
  return Layer.fresh(
    Layer.mergeAll(AiJobService.Default, OutboxAdmin.Default).pipe(
      Layer.provideMerge(
        Layer.mergeAll(
          jobCatalogLayer(modules),
          options.snapshotBuilder ?? SnapshotBuilder.Default,
          ModelRouter.Default,
          ProviderSettings.layer,
          CredentialVault.Default,
          ContentSafety.Default,
          AiCostCalculator.withTable(),
          PromptTemplates.Default(modules.flatMap((module) => module.prompts)),
          // The given provider replaces the synthetic one (its control stays, unused).
          options.gateway === undefined
            ? SyntheticGatewayLayer({ seed: options.seed ?? "engine-test" })
            : Layer.merge(SyntheticGatewayLayer({ seed: options.seed ?? "engine-test" }), options.gateway)
        )
      ),
      Layer.provideMerge(
        Layer.mergeAll(
          options.infrastructure ?? MemoryInfrastructure,
          options.capacity ?? MemoryCapacity,
          options.breaker ?? MemoryBreakers
        )
      ),
      Layer.provideMerge(
        Layer.mergeAll(
          TimingConfig.make(options.timing),
          QuotaLimitsConfig.make({ maxActiveJobsPerUser: 10_000, dailyJobQuota: 10_000 }),
          QueueSettings.make(),
          DispatcherSettings.make(),
          ProviderLimitsConfig.make(options.limits ?? {}),
          Layer.succeed(ProviderConfig, {
            baseUrl: "http://127.0.0.1:1",
            apiKey: Option.some(Redacted.make(testPlatformKey)),
            model: "deepseek-chat",
            credentialEncryptionKey: Option.some(Redacted.make(Buffer.alloc(32, 7).toString("base64")))
          })
        )
      )
    )
  )
}

/** Starts a dispatcher and a worker (both queues) in the caller's scope. */
export const startEngine = (workerId = "worker-1") =>
  Effect.gen(function*() {
    const dispatcher = yield* makeDispatcher
    yield* Effect.forkScoped(dispatcher.run)
    return yield* runWorker({ workerId, queues: allQueueNames })
  })

/** Moves the TestClock on in small steps until the job is in one of `statuses`. */
export const awaitStatus = (
  jobId: string,
  statuses: ReadonlyArray<LifecycleStatus>,
  options: { readonly stepMs?: number; readonly maxSteps?: number } = {}
) =>
  Effect.gen(function*() {
    const jobs = yield* AiJobLifecycleRepository
    const stepMs = options.stepMs ?? 50
    for (let step = 0; step < (options.maxSteps ?? 2_000); step++) {
      const job = Option.getOrThrow(yield* jobs.findById(jobId))
      if (statuses.includes(job.lifecycleStatus)) return job
      yield* TestClock.adjust(stepMs)
      yield* Effect.yieldNow()
    }
    const job = Option.getOrThrow(yield* jobs.findById(jobId))
    return yield* Effect.dieMessage(`job ${jobId} is still ${job.lifecycleStatus}, never reached ${statuses.join("/")}`)
  })

/** Lets every fiber run without moving the clock. */
export const settle = Effect.gen(function*() {
  for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
})

/** The business records a job's projection wrote, as its projector reads them back. */
export const recordsOf = (jobId: string) =>
  Effect.gen(function*() {
    const jobs = yield* AiJobLifecycleRepository
    const registry = yield* JobDefinitionRegistry
    const projectors = yield* ResultProjectors
    const job = Option.getOrThrow(yield* jobs.findById(jobId))
    const { definition } = yield* registry.get(job.jobType)
    const projector = yield* projectors.get(definition.projector ?? job.jobType)
    return yield* projector.records(job)
  })
