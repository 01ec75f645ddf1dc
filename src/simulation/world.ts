import {
  ConfigProvider,
  Context,
  Duration,
  Effect,
  Either,
  Exit,
  FiberRef,
  HashMap,
  Layer,
  Option,
  Random,
  Redacted,
  Scope
} from "effect"
import { CircuitBreakerSettings } from "../config/CircuitBreakerSettings.js"
import { CredentialKeyringSettings } from "../config/CredentialKeyringSettings.js"
import { DirectDispatchSettings } from "../config/DirectDispatchSettings.js"
import { DispatcherSettings } from "../config/DispatcherSettings.js"
import { ProviderConfig, TimingConfig } from "../config/EngineConfig.js"
import { EventDeliverySettings } from "../config/EventDeliverySettings.js"
import { ModelRouterSettings } from "../config/ModelRouterSettings.js"
import { defaultPriceTable } from "../config/PriceTableSettings.js"
import { ProviderLimitsConfig } from "../config/ProviderLimitsConfig.js"
import { ProviderSettings } from "../config/ProviderSettings.js"
import { QueueSettings } from "../config/QueueSettings.js"
import { QuotaLimitsConfig } from "../config/QuotaLimitsConfig.js"
import type { AiJob } from "../domain/AiJob.js"
import { CredentialError, ProviderError } from "../domain/ExecutionError.js"
import { allQueueNames } from "../domain/QueueName.js"
import { jobCatalog } from "../jobs/catalog.js"
import { jobCatalogLayer } from "../jobs/JobCatalogLive.js"
import {
  SyntheticGatewayControl,
  SyntheticGatewayLayer,
  type SyntheticStep
} from "../layers/gateway/SyntheticGateway.js"
import { InProcessCancelSignal } from "../layers/memory/InProcessCancelSignal.js"
import { InProcessJobEvents } from "../layers/memory/InProcessJobEvents.js"
import { InProcessOutboxSignal } from "../layers/memory/InProcessOutboxSignal.js"
import { MemoryAiJobLifecycleRepositoryWith } from "../layers/memory/MemoryAiJobLifecycleRepository.js"
import { MemoryArtifactRepository } from "../layers/memory/MemoryArtifactRepository.js"
import {
  makeMemoryBreakerStore,
  MemoryBreakerStore,
  MemoryCircuitBreaker
} from "../layers/memory/MemoryCircuitBreaker.js"
import { MemoryCredentialRepository } from "../layers/memory/MemoryCredentialRepository.js"
import { MemoryDatabase, MemoryDatabaseLive } from "../layers/memory/MemoryDatabase.js"
import { MemoryJobQueueControl, MemoryJobQueueLive } from "../layers/memory/MemoryJobQueue.js"
import { MemoryOutboxRepository } from "../layers/memory/MemoryOutboxRepository.js"
import { MemoryProjectionStore } from "../layers/memory/MemoryProjectionStore.js"
import { MemoryCapacityStore, MemoryProviderCapacity } from "../layers/memory/MemoryProviderCapacity.js"
import { MemoryQuotas } from "../layers/memory/MemoryQuotas.js"
import { MemorySnapshotRepository } from "../layers/memory/MemorySnapshotRepository.js"
import { MemoryUnitOfWork } from "../layers/memory/MemoryUnitOfWork.js"
import { MemoryUsageLogRepository } from "../layers/memory/MemoryUsageLogRepository.js"
import { MemoryWorkerDirectory } from "../layers/memory/MemoryWorkerDirectory.js"
import { CarriedFiberRefs, carry } from "../pipeline/groupRunner.js"
import { makeDispatcher } from "../pipeline/outbox/dispatcher.js"
import { makeEventDispatcher } from "../pipeline/outbox/eventDispatcher.js"
import { runReaper } from "../pipeline/reaper.js"
import { runWorker } from "../pipeline/worker.js"
import { AiCostCalculator } from "../services/AiCostCalculator.js"
import { AiGateway } from "../services/AiGateway.js"
import { AiJobLifecycleRepository } from "../services/AiJobLifecycleRepository.js"
import { AiJobService } from "../services/AiJobService.js"
import { CancelSignal } from "../services/CancelSignal.js"
import { ContentSafety } from "../services/ContentSafety.js"
import { CredentialVault } from "../services/CredentialVault.js"
import { JobDefinitionRegistry } from "../services/JobDefinitionRegistry.js"
import { encodeQueuePayload, JobQueue, JobQueueUnavailable, payloadFor } from "../services/JobQueue.js"
import { ModelRouter } from "../services/ModelRouter.js"
import { EventTargets } from "../services/outbox/EventTargets.js"
import { OutboxAdmin } from "../services/outbox/OutboxAdmin.js"
import { OutboxDirectPublisher } from "../services/outbox/OutboxDirectPublisher.js"
import { PromptTemplates } from "../services/PromptTemplates.js"
import { ProviderCapacity } from "../services/ProviderCapacity.js"
import { type BreakerStore, type BreakerWrite, ProviderCircuitBreaker } from "../services/ProviderCircuitBreaker.js"
import { SnapshotBuilder } from "../services/SnapshotBuilder.js"
import { SnapshotRepository } from "../services/SnapshotRepository.js"
import { type BreakerStoreWrite, currentAdmission } from "./failoverChecks.js"
import type { FaultAction, ProviderTrouble } from "./faults.js"
import type { DeliveryFaults } from "./faults.js"
import type { Monitor } from "./invariants.js"
import { currentRun, invariantNames } from "./invariants.js"
import {
  addAfterAnswer,
  breakerIgnored,
  cancelDeaf,
  cancelIgnored,
  capacityReleasedEarly,
  fallbacksDropped,
  handOffCostsAttempt,
  keyCrossesProvider,
  type PlantedBug,
  projectUnfenced,
  reaperOffByOne,
  snapshotAsInput,
  takeOverWithoutAttempt
} from "./plantedBugs.js"
import {
  type CallWatch,
  makeProcess,
  type OutageAnswer,
  processCancelSignal,
  processDatabase,
  processGateway,
  processQueue,
  processQueueAdds,
  type ProviderOutages,
  type SimProcess
} from "./process.js"
import { sealedEchoJobType } from "./sealedEcho.js"
import type { Trace } from "./trace.js"
import type { WorkloadAction } from "./workload.js"

/** The shape of one simulated deployment. */
export interface WorldSettings {
  readonly seed: string
  readonly workers: number
  readonly dispatchers: number
  readonly reapers: number
  readonly timing: TimingConfig["Type"]
  readonly dispatcherReleaseInterval: Duration.Duration
  readonly providerLatency: { readonly min: Duration.Duration; readonly max: Duration.Duration }
  /** The deliberate bug (see `MemoryAiJobLifecycleRepositoryOptions`); off unless proving the simulator. */
  readonly unsafeDisableFencing: boolean
  /** One deliberate bug planted in the wiring (see `plantedBugs.ts`); none unless proving an invariant. */
  readonly plantedBug: PlantedBug | null
  /** Creates add their own jobs to the queue, a dispatcher sweeping after `grace`; null: the dispatchers add every job. */
  readonly creatorAdds: { readonly grace: Duration.Duration } | null
  /**
   * Two providers, each with its own platform key, and a route `deepseek → backup` for
   * platform-key jobs; a user with a key of their own; provider outages; the breaker store and
   * each run's admissions watched. Otherwise one provider, as before (see `failoverWorld`).
   */
  readonly failover: boolean
}

/** The creating process's crashes between commit and queue add: how many creates still die there. */
interface CreatorCrashes {
  armed: number
  readonly onCrash: (jobId: string) => void
}

/**
 * The queue as the creating process reaches it: an armed crash takes the add (the process died
 * after its commit, so neither the add nor the published mark happens).
 */
const creatorQueue = (crashes: CreatorCrashes) =>
  Layer.effect(
    JobQueue,
    Effect.map(JobQueue, (queue) =>
      JobQueue.of({
        ...queue,
        add: (request) =>
          Effect.suspend(() => {
            if (crashes.armed === 0) return queue.add(request)
            crashes.armed -= 1
            crashes.onCrash(request.payload.jobId)
            return Effect.fail(
              new JobQueueUnavailable({ operation: "add", message: "the creating process died after its commit" })
            )
          })
      }))
  )

/** The creator's own queue add after its commit, when the run has it. */
const creatorAddsLayer = (settings: WorldSettings, crashes: CreatorCrashes) =>
  settings.creatorAdds === null
    ? Layer.empty
    : OutboxDirectPublisher.Default.pipe(
      Layer.provide(creatorQueue(crashes)),
      Layer.provide(Layer.succeed(DirectDispatchSettings, {
        enabled: true,
        grace: settings.creatorAdds.grace,
        addTimeout: Duration.millis(1_000),
        flushDelay: Duration.millis(100),
        batchSize: 500
      }))
    )

const fencingOff = (settings: WorldSettings) => settings.unsafeDisableFencing || settings.plantedBug === "fencing-off"

const simulationPlatformKey = "sk-simulation-platform-key"

/** The simulated provider's limits, tight enough to bind: the workers share them through one store, as through Redis. */
export const simulationProviderLimits = { "deepseek/deepseek-chat": { rpm: 60, concurrency: 4 } }

/**
 * The failover world's providers (the synthetic provider answers both), each with its own
 * platform key, its route for platform-key jobs, and its limits. A user-key job has only its
 * own provider: its route names no fallback.
 */
export const failoverWorld = {
  primary: "deepseek",
  backup: "backup",
  platformKeys: { deepseek: simulationPlatformKey, backup: "sk-simulation-backup-platform-key" },
  /** A platform-key job's targets: the default provider and model, then the backup (the route's fallback). */
  route: [{ provider: "deepseek", model: "deepseek-chat" }, { provider: "backup", model: "backup-chat" }],
  providerLimits: { ...simulationProviderLimits, "backup/backup-chat": { rpm: 240, concurrency: 4 } },
  prices: {
    ...defaultPriceTable,
    "backup-chat": { inputMicrosPerMillionTokens: 300_000, outputMicrosPerMillionTokens: 450_000 }
  },
  /** The user with a key of their own (for the primary), and that key. */
  keyUser: { userId: "user-1", apiKey: "sk-simulation-user-1-own-key" }
} as const

/** Each provider's platform key, as the monitor checks them. */
export const platformKeysOf = (failover: boolean): ReadonlyMap<string, Redacted.Redacted<string>> =>
  new Map(
    Object.entries(failover ? failoverWorld.platformKeys : { deepseek: simulationPlatformKey }).map((
      [provider, key]
    ) => [provider, Redacted.make(key)])
  )

/** The providers, the route and their keys as configuration gives them, for the failover world. */
const failoverProviders = Layer.mergeAll(
  ModelRouter.DefaultWithoutDependencies.pipe(
    Layer.provide(ModelRouterSettings.layer),
    Layer.provide(
      Layer.setConfigProvider(
        ConfigProvider.fromMap(
          new Map([[
            "AI_MODEL_ROUTES",
            JSON.stringify({ "*:platform_key": { fallbacks: failoverWorld.route.slice(1) } })
          ]])
        )
      )
    )
  ),
  CredentialVault.DefaultWithoutDependencies.pipe(Layer.provide(CredentialKeyringSettings.layer))
).pipe(
  Layer.provideMerge(
    ProviderSettings.make(
      Object.entries(failoverWorld.platformKeys).map(([name, key]) => ({
        name,
        apiKey: Option.some(Redacted.make(key))
      })),
      { defaultProvider: failoverWorld.primary }
    )
  )
)

/** The shared breaker store, each write told to `watch` (the store's own result: exact). */
const watchedBreakerStore = (watch: (write: BreakerStoreWrite) => void) =>
  Layer.effect(
    MemoryBreakerStore,
    Effect.map(makeMemoryBreakerStore, (store: BreakerStore): BreakerStore => {
      const told =
        <W extends BreakerWrite>(providerModel: string, operation: BreakerStoreWrite["operation"], now: number) =>
        (write: W) => {
          watch({ providerModel, operation, from: write.from, to: write.record.state, at: now })
          return write
        }
      return {
        ...store,
        tryProbe: (providerModel, now, probeLease) =>
          Effect.map(store.tryProbe(providerModel, now, probeLease), told(providerModel, "tryProbe", now)),
        recordFailure: (providerModel, now, settings) =>
          Effect.map(store.recordFailure(providerModel, now, settings), told(providerModel, "recordFailure", now)),
        recordSuccess: (providerModel, now, sentAt) =>
          Effect.map(store.recordSuccess(providerModel, now, sentAt), told(providerModel, "recordSuccess", now)),
        abandonProbe: (providerModel, now) =>
          Effect.map(store.abandonProbe(providerModel, now), told(providerModel, "abandonProbe", now))
      }
    })
  )

/** A run's breaker: each admission it asks for is remembered with its moment, for the calls that follow (`currentAdmission`). */
const admissionsWatched = (
  breaker: ProviderCircuitBreaker["Type"],
  now: () => number
): ProviderCircuitBreaker["Type"] => ({
  ...breaker,
  admit: (providerModel) =>
    Effect.zipRight(FiberRef.set(currentAdmission, { providerModel, at: now() }), breaker.admit(providerModel))
})

/** Every built-in job type, and the simulation's own whose snapshot differs from its input. */
const simulationCatalog = [...jobCatalog, sealedEchoJobType]

/** Everything the processes share: the memory infrastructure and the engine's services. */
const sharedLayer = (
  settings: WorldSettings,
  crashes: CreatorCrashes,
  breakerWatch: (write: BreakerStoreWrite) => void
) => {
  const lifecycle = MemoryAiJobLifecycleRepositoryWith({ unsafeDisableFencingForSimulation: fencingOff(settings) })
  const storage = MemoryQuotas.pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        lifecycle,
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
  const infrastructure = Layer.mergeAll(
    storage,
    MemoryJobQueueLive,
    InProcessOutboxSignal,
    InProcessCancelSignal,
    MemoryWorkerDirectory,
    InProcessJobEvents,
    MemoryCapacityStore.layer,
    settings.failover ? watchedBreakerStore(breakerWatch) : MemoryBreakerStore.layer
  )
  // One provider: the layers as they always were, so that seeds before the failover world replay exactly.
  const providers = settings.failover
    ? [failoverProviders] as const
    : [ModelRouter.Default, ProviderSettings.layer, CredentialVault.Default] as const
  return Layer.mergeAll(AiJobService.Default, OutboxAdmin.Default).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        jobCatalogLayer(simulationCatalog),
        SnapshotBuilder.Default,
        ...providers,
        ContentSafety.Default,
        AiCostCalculator.withTable(settings.failover ? failoverWorld.prices : undefined),
        PromptTemplates.Default(simulationCatalog.flatMap((module) => module.prompts)),
        SyntheticGatewayLayer({ seed: `provider:${settings.seed}`, latency: settings.providerLatency }),
        creatorAddsLayer(settings, crashes)
      )
    ),
    Layer.provideMerge(infrastructure),
    Layer.provideMerge(
      Layer.mergeAll(
        Layer.succeed(TimingConfig, settings.timing),
        QuotaLimitsConfig.make({ maxActiveJobsPerUser: 10_000, dailyJobQuota: 10_000 }),
        QueueSettings.make({ shutdownGrace: Duration.millis(5_000) }),
        ProviderLimitsConfig.make(settings.failover ? failoverWorld.providerLimits : simulationProviderLimits),
        CircuitBreakerSettings.make(),
        Layer.succeed(ProviderConfig, {
          baseUrl: "http://127.0.0.1:1",
          apiKey: Option.some(Redacted.make(simulationPlatformKey)),
          model: "deepseek-chat",
          credentialEncryptionKey: Option.some(Redacted.make(Buffer.alloc(32, 7).toString("base64")))
        })
      )
    )
  )
}

export type SharedServices = Layer.Layer.Success<ReturnType<typeof sharedLayer>>

/** A worker's own view of the shared services: its repositories on its own connection. */
const workerLayer = (
  settings: WorldSettings,
  shared: Context.Context<SharedServices>,
  process: SimProcess,
  db: MemoryDatabase["Type"],
  watch: CallWatch,
  outages: ProviderOutages | undefined
) => {
  const gateway = processGateway(Context.get(shared, AiGateway), process, watch, {
    dropRetryAfter: settings.plantedBug === "retry-after-ignored",
    credentialRefusalAsUnavailable: settings.plantedBug === "credential-refusal-retried",
    outages
  })
  // The failover world's vault reads the providers' keys from the shared settings.
  const vault = settings.failover
    ? CredentialVault.DefaultWithoutDependencies.pipe(Layer.provide(CredentialKeyringSettings.layer))
    : CredentialVault.Default
  return Layer.mergeAll(jobCatalogLayer(simulationCatalog), vault).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        MemoryAiJobLifecycleRepositoryWith({ unsafeDisableFencingForSimulation: fencingOff(settings) }),
        MemorySnapshotRepository,
        MemoryUnitOfWork,
        MemoryArtifactRepository,
        MemoryProjectionStore,
        MemoryCredentialRepository,
        MemoryUsageLogRepository
      )
    ),
    Layer.provideMerge(Layer.succeed(MemoryDatabase, db)),
    Layer.merge(Layer.succeed(AiGateway, gateway)),
    // Each worker waits in its own room; a crashed worker's permits lapse with its lock's lifetime.
    Layer.merge(
      MemoryProviderCapacity({ lease: settings.timing.jobLockTtl, workerId: process.id })
    ),
    // Each worker keeps its own view of the breakers every worker shares through one store.
    Layer.merge(MemoryCircuitBreaker),
    Layer.merge(Layer.succeed(JobQueue, processQueue(Context.get(shared, JobQueue), process))),
    Layer.merge(Layer.succeed(CancelSignal, processCancelSignal(Context.get(shared, CancelSignal), process)))
  )
}

/** The services of a worker that a planted bug may replace. */
type WorkerServices =
  | AiJobLifecycleRepository
  | JobDefinitionRegistry
  | SnapshotRepository
  | ProviderCapacity
  | CancelSignal
  | ProviderCircuitBreaker
  | CredentialVault

/** A worker's own services with the planted bug, if it lives there (`router`: the shared one). */
const plantInWorker = <S>(
  bug: PlantedBug | null,
  own: Context.Context<S | WorkerServices>,
  db: MemoryDatabase["Type"],
  router: ModelRouter
) => {
  const jobs = Context.get(own, AiJobLifecycleRepository)
  switch (bug) {
    case "takeover-without-attempt":
      return Context.add(own, AiJobLifecycleRepository, takeOverWithoutAttempt(jobs, db))
    case "ignored-cancel":
      return Context.add(own, JobDefinitionRegistry, cancelIgnored(Context.get(own, JobDefinitionRegistry)))
    case "fallbacks-dropped":
      return Context.add(own, ModelRouter, fallbacksDropped(router))
    default:
      return plantExtendedInWorker(bug, own, db)
  }
}

/** The bugs the extended and failover fault sets prove their invariants on (see `plantedBugs.ts`). */
const plantExtendedInWorker = <S>(
  bug: PlantedBug | null,
  own: Context.Context<S | WorkerServices>,
  db: MemoryDatabase["Type"]
) => {
  const jobs = Context.get(own, AiJobLifecycleRepository)
  switch (bug) {
    case "handoff-costs-attempt":
      return Context.add(own, AiJobLifecycleRepository, handOffCostsAttempt(jobs, db))
    case "project-unfenced":
      return Context.add(own, AiJobLifecycleRepository, projectUnfenced(jobs, db))
    case "snapshot-replaced-by-input": {
      const planted = snapshotAsInput(jobs, Context.get(own, SnapshotRepository))
      return own.pipe(
        Context.add(AiJobLifecycleRepository, planted.jobs),
        Context.add(SnapshotRepository, planted.snapshots)
      )
    }
    case "capacity-released-early":
      return Context.add(own, ProviderCapacity, capacityReleasedEarly(Context.get(own, ProviderCapacity)))
    case "cancel-deaf": {
      const planted = cancelDeaf(jobs, Context.get(own, CancelSignal))
      return own.pipe(Context.add(AiJobLifecycleRepository, planted.jobs), Context.add(CancelSignal, planted.cancels))
    }
    case "breaker-ignored":
      return Context.add(own, ProviderCircuitBreaker, breakerIgnored(Context.get(own, ProviderCircuitBreaker)))
    case "key-crosses-provider":
      return Context.add(own, CredentialVault, keyCrossesProvider(Context.get(own, CredentialVault)))
    default:
      return own
  }
}

interface AgendaItem {
  readonly at: number
  readonly seq: number
  readonly label: string
  readonly run: Effect.Effect<void>
}

const providerStep = (trouble: ProviderTrouble): SyntheticStep => {
  switch (trouble._tag) {
    case "Unavailable":
      return { _tag: "Fail", error: new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: "simulated 503" }) }
    case "RateLimited":
      return {
        _tag: "Fail",
        error: new ProviderError({
          code: "PROVIDER_RATE_LIMITED",
          message: "simulated 429",
          retryAfterMs: trouble.retryAfterMs
        })
      }
    case "Slow":
      return { _tag: "Delay", duration: Duration.millis(trouble.ms) }
    case "Hang":
      return { _tag: "Hang" }
    case "NotJson":
      return { _tag: "RespondText", text: "Sure! Here is your answer (not JSON)." }
    case "CredentialRejected":
      return {
        _tag: "Fail",
        error: new CredentialError({ code: "CREDENTIAL_INVALID", message: "simulated 401: the key was refused" })
      }
  }
}

const positive = (n: number, length: number) => ((n % length) + length) % length

/**
 * One simulated deployment: the shared memory infrastructure, several worker and dispatcher
 * processes, reapers, and the clients' and operators' actions. The simulator only swaps layers
 * and injects faults; every decision is the engine's own code.
 */
export const makeWorld = (options: {
  readonly settings: WorldSettings
  readonly trace: Trace
  readonly monitor: Monitor
  readonly now: () => number
}) =>
  Effect.gen(function*() {
    const { monitor, settings, trace } = options
    const worldScope = yield* Effect.scope
    const creatorCrashes: CreatorCrashes = {
      armed: 0,
      onCrash: (jobId) => trace.record("fault", { kind: "creator-crash", job: trace.alias(jobId) })
    }
    const shared = yield* Layer.build(sharedLayer(settings, creatorCrashes, monitor.breakerWritten))
    const db = Context.get(shared, MemoryDatabase)
    const queueControl = Context.get(shared, MemoryJobQueueControl)
    const gatewayControl = Context.get(shared, SyntheticGatewayControl)
    const jobs = Context.get(shared, AiJobLifecycleRepository)
    const service = Context.get(shared, AiJobService)
    const cancels = Context.get(shared, CancelSignal)
    const outboxAdmin = Context.get(shared, OutboxAdmin)
    yield* db.setCommitObserver(Option.some(monitor.observer({ jobIds: queueControl.jobIds })))

    /** The providers down now (the failover world's outages; overlapping ones of a provider count). */
    const down = new Map<string, { count: number; answer: OutageAnswer }>()
    const outages: ProviderOutages | undefined = settings.failover
      ? (provider) => down.get(provider)?.answer
      : undefined
    if (settings.failover) {
      // As the user's `POST /api/ai/credentials`: their jobs then run on their own key, at the primary only.
      const { apiKey, userId } = failoverWorld.keyUser
      const stored = yield* Context.get(shared, CredentialVault).store({
        userId,
        apiKey: Redacted.make(apiKey),
        provider: failoverWorld.primary
      }).pipe(
        Effect.orDie
      )
      monitor.userKeyStored(stored.id, { userId, provider: failoverWorld.primary, apiKey: Redacted.make(apiKey) })
      trace.record("setup", { userKey: userId, provider: failoverWorld.primary })
    }

    const agenda: Array<AgendaItem> = []
    let agendaSeq = 0
    const schedule = (at: number, label: string, run: Effect.Effect<void>) => {
      const item: AgendaItem = { at, seq: agendaSeq++, label, run }
      let index = agenda.length
      while (
        index > 0 && (agenda[index - 1]!.at > at || (agenda[index - 1]!.at === at && agenda[index - 1]!.seq > item.seq))
      ) index--
      agenda.splice(index, 0, item)
    }

    const workers: Array<SimProcess | undefined> = Array.from({ length: settings.workers }, () => undefined)
    const dispatchers: Array<SimProcess | undefined> = Array.from({ length: settings.dispatchers }, () => undefined)
    const incarnations = {
      worker: new Array<number>(settings.workers).fill(0),
      dispatcher: new Array<number>(settings.dispatchers).fill(0)
    }
    let deliveryFaults: DeliveryFaults | undefined
    let faultsOn = true
    const restartDelays = new Map<string, number>()

    /** The PROJECT pause waiting for a worker to begin PROJECT, if one is armed. */
    let projectPause: ((process: SimProcess) => (jobId: string) => Effect.Effect<void>) | null = null
    const disarmProjectPause = () => {
      projectPause = null
      for (const process of workers) process?.armProjectPause(null)
    }

    const onCrash = (process: SimProcess, where: string) =>
      Effect.sync(() => {
        trace.record("crash", { process: process.id, at: where })
        if (process.kind === "worker" && workers[process.slot] === process) workers[process.slot] = undefined
        if (process.kind === "dispatcher" && dispatchers[process.slot] === process) {
          dispatchers[process.slot] = undefined
        }
        const delay = restartDelays.get(process.id) ?? 1_000
        schedule(options.now() + delay, `restart ${process.kind} ${process.slot}`, start(process.kind, process.slot))
      })

    const startWorker = (slot: number) =>
      Effect.gen(function*() {
        const incarnation = incarnations.worker[slot]!
        incarnations.worker[slot] = incarnation + 1
        const id = `w${slot + 1}${incarnation === 0 ? "" : `.${incarnation}`}`
        const process = yield* makeProcess({ id, slot, kind: "worker", hooks: { onCrash } })
        const processDb = processDatabase(db, process)
        const built = yield* Layer.build(
          workerLayer(
            settings,
            shared,
            process,
            processDb,
            { started: monitor.callStarted, ended: monitor.callEnded },
            outages
          )
        ).pipe(Effect.provide(shared), Scope.extend(process.scope))
        const planted = plantInWorker(settings.plantedBug, built, processDb, Context.get(shared, ModelRouter))
        // Outside any planted bug: the admission the run asked for, whatever it was told.
        const own = settings.failover
          ? Context.add(
            planted,
            ProviderCircuitBreaker,
            admissionsWatched(Context.get(planted, ProviderCircuitBreaker), monitor.now)
          )
          : planted
        if (projectPause !== null) process.armProjectPause(projectPause(process))
        yield* runWorker({ workerId: id, queues: allQueueNames }).pipe(
          Effect.provide(Context.merge(shared, own)),
          // A grouped lock or commit runs in the committer's fiber, as its first submitter's run.
          Effect.provideService(CarriedFiberRefs, [carry(currentRun)]),
          Scope.extend(process.scope)
        )
        workers[slot] = process
        trace.record("start", { process: id })
      })

    const startDispatcher = (slot: number) =>
      Effect.gen(function*() {
        const incarnation = incarnations.dispatcher[slot]!
        incarnations.dispatcher[slot] = incarnation + 1
        const id = `d${slot + 1}${incarnation === 0 ? "" : `.${incarnation}`}`
        const process = yield* makeProcess({ id, slot, kind: "dispatcher", hooks: { onCrash } })
        const storage = yield* Layer.build(
          MemoryOutboxRepository.pipe(Layer.provide(Layer.succeed(MemoryDatabase, processDatabase(db, process))))
        ).pipe(Scope.extend(process.scope))
        const adds = processQueueAdds(
          Context.get(shared, JobQueue),
          queueControl,
          process,
          () => (faultsOn ? deliveryFaults : undefined),
          (what, jobId, ms) => trace.record("delivery", { job: trace.alias(jobId), what, ms, by: id })
        )
        const own = storage.pipe(
          Context.add(
            JobQueue,
            settings.plantedBug === "publish-before-add" ? addAfterAnswer(adds, process.scope) : adds
          ),
          Context.add(DispatcherSettings, {
            ...DispatcherSettings.defaults,
            dispatcherId: id,
            releaseInterval: settings.dispatcherReleaseInterval
          }),
          // Terminal events have no target here: the notify lane settles them.
          Context.add(EventTargets, []),
          Context.add(EventDeliverySettings, EventDeliverySettings.defaults)
        )
        yield* Effect.zipRight(
          Effect.flatMap(makeDispatcher, (dispatcher) => dispatcher.run),
          Effect.flatMap(makeEventDispatcher, (events) => events.run)
        ).pipe(
          Effect.provide(Context.merge(shared, own)),
          Scope.extend(process.scope)
        )
        dispatchers[slot] = process
        trace.record("start", { process: id })
      })

    const start = (kind: "worker" | "dispatcher", slot: number): Effect.Effect<void> =>
      Effect.suspend(() => {
        const current = kind === "worker" ? workers[slot] : dispatchers[slot]
        if (current !== undefined) return Effect.void
        return kind === "worker" ? startWorker(slot) : startDispatcher(slot)
      }).pipe(Effect.orDie)

    // The deployment: dispatchers, workers and reapers.
    for (let slot = 0; slot < settings.dispatchers; slot++) yield* start("dispatcher", slot)
    for (let slot = 0; slot < settings.workers; slot++) yield* start("worker", slot)
    const reaperContext = settings.plantedBug === "reaper-off-by-one"
      ? Context.add(shared, AiJobLifecycleRepository, reaperOffByOne(jobs))
      : shared
    for (let i = 0; i < settings.reapers; i++) {
      yield* Effect.forkIn(runReaper.pipe(Effect.provide(reaperContext)), worldScope)
    }

    // ---- the clients and operators ----

    /** Jobs the clients know, in the order they learned of them. */
    const known: Array<string> = []
    const keyOwner = new Map<string, string>()

    // Suspended: the actions are built when the run is planned, before any job is known.
    const findJob = (pick: number): Effect.Effect<Option.Option<AiJob>> =>
      Effect.suspend(() =>
        known.length === 0
          ? Effect.succeed(Option.none())
          : jobs.findById(known[positive(pick, known.length)]!).pipe(Effect.orElseSucceed(() => Option.none<AiJob>()))
      )

    const create = (action: Extract<WorkloadAction, { _tag: "Create" }>) =>
      Effect.gen(function*() {
        const request = {
          userId: action.userId,
          jobType: action.jobType,
          targetType: "simulation",
          targetId: `target-${action.at}`,
          idempotencyKey: action.idempotencyKey ?? undefined,
          input: action.input,
          // As the HTTP API: a user who stored a key of their own runs on it.
          ...(settings.failover ? { storedKeyOf: failoverWorld.primary } : {})
        }
        const results = yield* Effect.all(
          Array.from({ length: action.copies }, () => Effect.either(service.createJob(request))),
          { concurrency: "unbounded" }
        )
        for (const result of results) {
          if (Either.isLeft(result)) {
            trace.record("create", { type: action.jobType, key: action.idempotencyKey, outcome: result.left._tag })
            continue
          }
          const { created, job } = result.right
          trace.record("create", {
            job: trace.alias(job.id),
            type: action.jobType,
            key: action.idempotencyKey,
            created
          })
          if (!known.includes(job.id)) known.push(job.id)
          if (action.idempotencyKey !== null) {
            const key = `${action.userId}/${action.jobType}/${action.idempotencyKey}`
            const owner = keyOwner.get(key)
            if (owner === undefined) keyOwner.set(key, job.id)
            else if (owner !== job.id) {
              monitor.fail(
                invariantNames.oneJobPerKey,
                `${key} answered ${trace.alias(owner)} and ${trace.alias(job.id)}`
              )
            }
          }
        }
      })

    /** As the HTTP API's cancel: record the request, then publish it if the job is running. */
    const cancelJob = (jobId: string) =>
      Effect.gen(function*() {
        const after = yield* Effect.either(jobs.requestCancel(jobId))
        if (Either.isLeft(after)) {
          trace.record("cancel", { job: trace.alias(jobId), outcome: after.left._tag })
          return
        }
        trace.record("cancel", { job: trace.alias(jobId), outcome: after.right.lifecycleStatus })
        if (after.right.lifecycleStatus === "running") yield* cancels.publish(after.right.id)
      })

    const cancel = (pick: number) =>
      Effect.flatMap(findJob(pick), Option.match({ onNone: () => Effect.void, onSome: (job) => cancelJob(job.id) }))

    /** As the admin API's retry: a new job with the same input, for a failed or cancelled job. */
    const adminRetry = (pick: number) =>
      Effect.gen(function*() {
        const original = yield* findJob(pick)
        if (Option.isNone(original)) return
        const job = original.value
        if (job.lifecycleStatus !== "failed" && job.lifecycleStatus !== "cancelled") {
          trace.record("retry", { job: trace.alias(job.id), outcome: `not retryable (${job.lifecycleStatus})` })
          return
        }
        const retried = yield* Effect.either(service.createJob({
          userId: job.userId,
          jobType: job.jobType,
          targetType: job.targetType,
          targetId: job.targetId,
          input: job.input,
          enforceQuotas: false,
          overrides: { priority: job.priority }
        }))
        if (Either.isLeft(retried)) {
          trace.record("retry", { job: trace.alias(job.id), outcome: retried.left._tag })
          return
        }
        known.push(retried.right.job.id)
        trace.record("retry", { job: trace.alias(job.id), as: trace.alias(retried.right.job.id) })
      })

    const applyWorkload = (action: WorkloadAction): Effect.Effect<void> => {
      switch (action._tag) {
        case "Create":
          return create(action)
        case "Cancel":
          return cancel(action.pick)
        case "AdminRetry":
          return adminRetry(action.pick)
      }
    }

    // ---- the faults ----

    let databaseFaultWindows = 0
    let queueOutages = 0

    const applyFault = (action: FaultAction): Effect.Effect<void> =>
      Effect.gen(function*() {
        if (!faultsOn) return
        switch (action._tag) {
          case "CrashWorker": {
            const process = workers[action.slot]
            if (process === undefined) return
            restartDelays.set(process.id, action.restartAfterMs)
            trace.record("fault", { kind: "crash-armed", process: process.id, point: action.point })
            if (action.point === "anywhere") yield* process.crash("anywhere")
            else process.arm(action.point)
            return
          }
          case "CrashDispatcher": {
            const process = dispatchers[action.slot]
            if (process === undefined) return
            restartDelays.set(process.id, action.restartAfterMs)
            trace.record("fault", { kind: "crash-armed", process: process.id, point: "after-claim" })
            process.arm("after-claim")
            return
          }
          case "PauseWorker": {
            const process = workers[action.slot]
            if (process === undefined || process.isPaused()) return
            trace.record("fault", { kind: "pause-armed", process: process.id, ms: action.durationMs })
            process.armPause((jobId) =>
              Effect.sync(() => {
                if (!faultsOn) return
                trace.record("fault", {
                  kind: "pause",
                  process: process.id,
                  holding: trace.alias(jobId),
                  ms: action.durationMs
                })
                monitor.processPaused(process.id)
                schedule(options.now() + action.durationMs, `resume ${process.id}`, resumeLater(process))
                if (action.cancelHeldJob) {
                  schedule(
                    options.now() + Math.floor(action.durationMs / 2),
                    "cancel the zombie's job",
                    cancelJob(jobId)
                  )
                }
              })
            )
            return
          }
          case "Provider": {
            trace.record("fault", { kind: "provider", steps: action.trouble.map((t) => t._tag).join(",") })
            yield* gatewayControl.script(action.trouble.map(providerStep))
            return
          }
          case "CrashCreator": {
            trace.record("fault", { kind: "creator-crash-armed", creates: action.creates })
            creatorCrashes.armed += action.creates
            return
          }
          case "QueueOutage": {
            trace.record("fault", { kind: "queue-down", ms: action.durationMs })
            queueOutages += 1
            yield* queueControl.setUnreachable(true)
            schedule(
              options.now() + action.durationMs,
              "queue back",
              Effect.suspend(() => {
                queueOutages -= 1
                if (queueOutages > 0) return Effect.void
                trace.record("fault", { kind: "queue-up" })
                return queueControl.setUnreachable(false)
              })
            )
            return
          }
          case "DatabaseFaults": {
            trace.record("fault", { kind: "db-faults", rate: action.rate, ms: action.durationMs })
            databaseFaultWindows += 1
            yield* db.setFaults(Option.some(() =>
              Effect.map(
                Random.next,
                (roll) => (roll < action.rate ? Option.some("simulated transient database error") : Option.none())
              )
            ))
            schedule(
              options.now() + action.durationMs,
              "db faults end",
              Effect.suspend(() => {
                databaseFaultWindows -= 1
                if (databaseFaultWindows > 0) return Effect.void
                trace.record("fault", { kind: "db-ok" })
                return db.setFaults(Option.none())
              })
            )
            return
          }
          case "StopWorker":
          case "PauseInProject":
            return yield* applyExtendedFault(action)
          case "ProviderOutage":
            return yield* providerOutage(action)
          case "DuplicateDelivery": {
            const job = yield* findJob(action.pick)
            if (Option.isNone(job)) return
            const payload = payloadFor({
              jobId: job.value.id,
              jobType: job.value.jobType,
              createdAt: job.value.createdAt
            })
            trace.record("fault", { kind: "duplicate-delivery", job: trace.alias(job.value.id) })
            yield* queueControl.addRaw(
              job.value.queueName,
              `${payload.dedupeKey}-extra-${action.at}`,
              encodeQueuePayload(payload)
            )
            return
          }
        }
      })

    /** A frozen process runs again (unless something woke it first). */
    const resumeLater = (process: SimProcess) =>
      Effect.suspend(() => {
        if (!process.isPaused()) return Effect.void
        trace.record("fault", { kind: "resume", process: process.id })
        monitor.processResumed(process.id)
        return process.resume
      })

    /** The faults of the extended set (see `generateExtendedFaults`). */
    const applyExtendedFault = (action: Extract<FaultAction, { readonly _tag: "StopWorker" | "PauseInProject" }>) =>
      Effect.suspend(() => {
        switch (action._tag) {
          case "StopWorker": {
            const process = workers[action.slot]
            if (process === undefined || process.isPaused()) return Effect.void
            // As SIGTERM: the worker's scope closes gracefully (it hands its jobs back, then its
            // consumers wait for their deliveries), and a new one starts later.
            trace.record("fault", { kind: "stop", process: process.id })
            workers[action.slot] = undefined
            schedule(
              options.now() + action.restartAfterMs,
              `restart worker ${action.slot}`,
              start("worker", action.slot)
            )
            return Effect.asVoid(Effect.forkDaemon(Scope.close(process.scope, Exit.void)))
          }
          case "PauseInProject": {
            // Whichever worker begins PROJECT first (one started later too) freezes there.
            trace.record("fault", { kind: "project-pause-armed", ms: action.durationMs })
            projectPause = (process) => (jobId) =>
              Effect.suspend(() => {
                if (projectPause === null || !faultsOn || process.isPaused()) return Effect.void
                disarmProjectPause()
                trace.record("fault", {
                  kind: "pause-in-project",
                  process: process.id,
                  holding: trace.alias(jobId),
                  ms: action.durationMs
                })
                monitor.processPaused(process.id)
                schedule(options.now() + action.durationMs, `resume ${process.id}`, resumeLater(process))
                if (action.cancelHeldJob) {
                  schedule(options.now() + Math.floor(action.durationMs / 2), "cancel the frozen job", cancelJob(jobId))
                }
                return process.pause
              })
            for (const process of workers) process?.armProjectPause(projectPause(process))
            return Effect.void
          }
        }
      })

    const providerBack = (provider: string) =>
      Effect.sync(() => {
        down.delete(provider)
        trace.record("fault", { kind: "provider-up", provider, calls: monitor.providerUp(provider) })
      })

    /** The failover fault set's outage: the provider answers nothing but PROVIDER_UNAVAILABLE for a while. */
    const providerOutage = (action: Extract<FaultAction, { readonly _tag: "ProviderOutage" }>) =>
      Effect.sync(() => {
        const { answerMs, durationMs, provider, refused } = action
        trace.record("fault", {
          kind: "provider-down",
          provider,
          ms: durationMs,
          answer: refused ? "refused" : `503 after ${answerMs} ms`
        })
        const current = down.get(provider)
        if (current === undefined) monitor.providerDown(provider)
        down.set(provider, { count: (current?.count ?? 0) + 1, answer: { answerMs, refused } })
        schedule(
          options.now() + durationMs,
          `${provider} back`,
          Effect.suspend(() => {
            const outage = down.get(provider)
            if (outage === undefined) return Effect.void
            outage.count -= 1
            return outage.count > 0 ? Effect.void : providerBack(provider)
          })
        )
      })

    /**
     * The fault-free tail: every fault ends, dead processes restart, and the operator replays
     * dead outbox events (the runbook's answer to an outage longer than the dispatch retries).
     */
    const endFaults = Effect.gen(function*() {
      faultsOn = false
      deliveryFaults = undefined
      creatorCrashes.armed = 0
      trace.record("tail", { note: "faults off" })
      yield* queueControl.setUnreachable(false)
      yield* db.setFaults(Option.none())
      yield* gatewayControl.reset
      for (const provider of [...down.keys()]) yield* providerBack(provider)
      disarmProjectPause()
      for (const process of [...workers, ...dispatchers]) {
        if (process === undefined) continue
        process.arm(null)
        process.armPause(null)
        if (process.isPaused()) {
          trace.record("fault", { kind: "resume", process: process.id })
          monitor.processResumed(process.id)
          yield* process.resume
        }
      }
      for (let slot = 0; slot < settings.workers; slot++) yield* start("worker", slot)
      for (let slot = 0; slot < settings.dispatchers; slot++) yield* start("dispatcher", slot)
    })

    const replayDeadEvents = Effect.gen(function*() {
      const tables = yield* db.snapshot
      for (const event of HashMap.values(tables.outboxEvent)) {
        if (event.status !== "dead") continue
        const replayed = yield* Effect.either(outboxAdmin.replayDead(event.id))
        trace.record("operator", {
          replay: trace.alias(event.aggregateId),
          outcome: Either.isRight(replayed) ? "pending" : replayed.left._tag
        })
      }
    })

    const shutdown = Effect.gen(function*() {
      yield* db.setCommitObserver(Option.none())
      for (const process of [...workers, ...dispatchers]) {
        if (process !== undefined) yield* Effect.forkDaemon(Scope.close(process.scope, Exit.void))
      }
    })

    /** For a failure report: is the job on its queue at all (under its own or a duplicate's id)? */
    const queueEntriesOf = (job: AiJob) =>
      Effect.map(queueControl.jobIds(job.queueName), (ids) => {
        const own = payloadFor({ jobId: job.id, jobType: job.jobType, createdAt: job.createdAt }).dedupeKey
        return ids.filter((id) => id.startsWith(own)).length
      })

    return {
      shared,
      db,
      queueEntriesOf,
      agenda,
      schedule,
      applyWorkload,
      applyFault,
      setDeliveryFaults: (faults: DeliveryFaults) => {
        deliveryFaults = faults
      },
      endFaults,
      replayDeadEvents,
      shutdown,
      knownJobs: () => known.length
    }
  })

export type World = Effect.Effect.Success<ReturnType<typeof makeWorld>>
