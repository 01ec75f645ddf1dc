import { Layer } from "effect"
import { TimingConfig } from "../../src/config/EngineConfig.js"
import { type QuotaLimits, QuotaLimitsConfig } from "../../src/config/QuotaLimitsConfig.js"
import { syntheticEcho } from "../../src/jobs/synthetic_echo/definition.js"
import { InProcessOutboxSignal } from "../../src/layers/memory/InProcessOutboxSignal.js"
import { MemoryAiJobLifecycleRepository } from "../../src/layers/memory/MemoryAiJobLifecycleRepository.js"
import { MemoryCredentialRepository } from "../../src/layers/memory/MemoryCredentialRepository.js"
import { MemoryDatabaseLive } from "../../src/layers/memory/MemoryDatabase.js"
import { MemoryOutboxRepository } from "../../src/layers/memory/MemoryOutboxRepository.js"
import { MemoryQuotas } from "../../src/layers/memory/MemoryQuotas.js"
import { MemorySnapshotRepository } from "../../src/layers/memory/MemorySnapshotRepository.js"
import { MemoryUnitOfWork } from "../../src/layers/memory/MemoryUnitOfWork.js"
import { MysqlAiJobLifecycleRepository } from "../../src/layers/mysql/MysqlAiJobLifecycleRepository.js"
import { MysqlCredentialRepository } from "../../src/layers/mysql/MysqlCredentialRepository.js"
import { MysqlOutboxRepository } from "../../src/layers/mysql/MysqlOutboxRepository.js"
import { MysqlQuotas } from "../../src/layers/mysql/MysqlQuotas.js"
import { MysqlSnapshotRepository } from "../../src/layers/mysql/MysqlSnapshotRepository.js"
import { MysqlUnitOfWork } from "../../src/layers/mysql/MysqlUnitOfWork.js"
import { AiJobService } from "../../src/services/AiJobService.js"
import { JobDefinitionRegistry } from "../../src/services/JobDefinitionRegistry.js"
import { SnapshotBuilder } from "../../src/services/SnapshotBuilder.js"
import { projectorKeysOnly } from "./projectorKeys.js"

/** Limits no contract test reaches; the quota tests set their own. */
const generousLimits: Partial<QuotaLimits> = { maxActiveJobsPerUser: 10_000, dailyJobQuota: 10_000 }
import { type ScratchClientOptions, scratchMysqlLayer } from "./scratchDatabase.js"

/**
 * Every stack is `Layer.fresh`: `it.layer` blocks of one file share a memo map, and the module
 * constants below would otherwise be built once and shared by stacks meant to be separate.
 */
export const memoryRepositoriesWith = (limits: Partial<QuotaLimits>) =>
  Layer.fresh(MemoryQuotas).pipe(
    Layer.provideMerge(
      Layer.fresh(
        Layer.mergeAll(
          MemoryAiJobLifecycleRepository,
          MemoryOutboxRepository,
          MemorySnapshotRepository,
          MemoryUnitOfWork,
          MemoryCredentialRepository
        )
      )
    ),
    Layer.provideMerge(Layer.merge(Layer.fresh(MemoryDatabaseLive), QuotaLimitsConfig.make(limits)))
  )

export const memoryRepositories = memoryRepositoriesWith(generousLimits)

/** What job creation needs on MySQL, over whatever `SqlClient` it is given. */
export const mysqlCreationRepositories = Layer.mergeAll(
  MysqlAiJobLifecycleRepository,
  MysqlOutboxRepository,
  MysqlSnapshotRepository,
  MysqlUnitOfWork,
  MysqlQuotas,
  MysqlCredentialRepository
)

export const mysqlRepositories = (
  prefix: string,
  limits: Partial<QuotaLimits> = generousLimits,
  client: ScratchClientOptions = {}
) =>
  Layer.fresh(mysqlCreationRepositories).pipe(
    Layer.provideMerge(
      Layer.merge(scratchMysqlLayer(prefix, { maxConnections: 20, ...client }), QuotaLimitsConfig.make(limits))
    )
  )

/** Job creation over a set of repositories, with the synthetic job type registered. */
export const jobCreation = <E, R>(repositories: Layer.Layer<R, E>) =>
  Layer.fresh(AiJobService.Default).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        JobDefinitionRegistry.withSpecs([syntheticEcho]).pipe(Layer.provide(projectorKeysOnly(["synthetic_echo"]))),
        Layer.fresh(SnapshotBuilder.Default).pipe(Layer.provide(TimingConfig.make())),
        Layer.fresh(InProcessOutboxSignal)
      )
    ),
    Layer.provideMerge(repositories)
  )
