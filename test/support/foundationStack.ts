import { Layer } from "effect"
import { syntheticEcho } from "../../src/jobs/synthetic_echo/definition.js"
import { AiJobServiceLive } from "../../src/layers/core/AiJobServiceLive.js"
import { jobDefinitionRegistryWith } from "../../src/layers/core/JobDefinitionRegistryLive.js"
import { SnapshotBuilderLive } from "../../src/layers/core/SnapshotBuilderLive.js"
import { TimingConfig } from "../../src/layers/config.js"
import { MemoryAiJobLifecycleRepository } from "../../src/layers/memory/MemoryAiJobLifecycleRepository.js"
import { MemoryDatabaseLive } from "../../src/layers/memory/MemoryDatabase.js"
import { MemoryOutboxRepository } from "../../src/layers/memory/MemoryOutboxRepository.js"
import { MemorySnapshotRepository } from "../../src/layers/memory/MemorySnapshotRepository.js"
import { MemoryUnitOfWork } from "../../src/layers/memory/MemoryUnitOfWork.js"
import { InProcessOutboxSignal } from "../../src/layers/memory/InProcessOutboxSignal.js"
import { MysqlAiJobLifecycleRepository } from "../../src/layers/mysql/MysqlAiJobLifecycleRepository.js"
import { MysqlOutboxRepository } from "../../src/layers/mysql/MysqlOutboxRepository.js"
import { MysqlSnapshotRepository } from "../../src/layers/mysql/MysqlSnapshotRepository.js"
import { MysqlUnitOfWork } from "../../src/layers/mysql/MysqlUnitOfWork.js"
import { projectorKeysOnly } from "./projectorKeys.js"
import { scratchMysqlLayer } from "./scratchDatabase.js"

export const memoryRepositories = Layer.mergeAll(
  MemoryAiJobLifecycleRepository,
  MemoryOutboxRepository,
  MemorySnapshotRepository,
  MemoryUnitOfWork
).pipe(Layer.provideMerge(MemoryDatabaseLive))

export const mysqlRepositories = (prefix: string) =>
  Layer.mergeAll(MysqlAiJobLifecycleRepository, MysqlOutboxRepository, MysqlSnapshotRepository, MysqlUnitOfWork).pipe(
    Layer.provideMerge(scratchMysqlLayer(prefix, { maxConnections: 20 }))
  )

/** Job creation over a set of repositories, with the synthetic job type registered. */
export const jobCreation = <E, R>(repositories: Layer.Layer<R, E>) =>
  AiJobServiceLive.pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        jobDefinitionRegistryWith([syntheticEcho]).pipe(Layer.provide(projectorKeysOnly(["synthetic_echo"]))),
        SnapshotBuilderLive.pipe(Layer.provide(TimingConfig.make())),
        InProcessOutboxSignal
      )
    ),
    Layer.provideMerge(repositories)
  )
