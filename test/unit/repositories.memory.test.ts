import { Layer, TestClock } from "effect"
import { MemoryArtifactRepository } from "../../src/layers/memory/MemoryArtifactRepository.js"
import { MemoryJobStatistics } from "../../src/layers/memory/MemoryJobStatistics.js"
import { MemoryProjectionStore } from "../../src/layers/memory/MemoryProjectionStore.js"
import { MemoryUsageLogRepository } from "../../src/layers/memory/MemoryUsageLogRepository.js"
import { lifecycleRepositoryContract } from "../contract/AiJobLifecycleRepository.contract.js"
import { groupCommitContract } from "../contract/GroupCommit.contract.js"
import { jobStatisticsContract } from "../contract/JobStatistics.contract.js"
import { outboxClaimsContract } from "../contract/OutboxRepository.claims.contract.js"
import { outboxRepositoryContract } from "../contract/OutboxRepository.contract.js"
import { projectionStoreContract } from "../contract/ProjectionStore.contract.js"
import { quotasContract } from "../contract/Quotas.contract.js"
import { terminalEventsContract } from "../contract/TerminalEvents.contract.js"
import { jobCreation, memoryRepositories, memoryRepositoriesWith } from "../support/foundationStack.js"

const harness = {
  name: "memory",
  layer: jobCreation(memoryRepositories).pipe(Layer.orDie),
  advance: (millis: number) => TestClock.adjust(millis),
  liveClock: false,
  lockTtlMs: 1_000
}

lifecycleRepositoryContract(harness)
outboxRepositoryContract(harness)
terminalEventsContract({
  ...harness,
  layer: jobCreation(Layer.fresh(MemoryArtifactRepository).pipe(Layer.provideMerge(memoryRepositories))).pipe(
    Layer.orDie
  )
})
groupCommitContract({
  ...harness,
  layer: jobCreation(Layer.fresh(MemoryArtifactRepository).pipe(Layer.provideMerge(memoryRepositories))).pipe(
    Layer.orDie
  )
})
outboxClaimsContract(harness)

quotasContract(
  "memory",
  jobCreation(memoryRepositoriesWith({ maxActiveJobsPerUser: 5, dailyJobQuota: 8 })).pipe(Layer.orDie),
  {
    liveClock: false
  }
)

projectionStoreContract({
  name: "memory",
  layer: jobCreation(Layer.fresh(MemoryProjectionStore).pipe(Layer.provideMerge(memoryRepositories))).pipe(Layer.orDie),
  liveClock: false
})

jobStatisticsContract({
  name: "memory",
  layer: jobCreation(
    Layer.merge(MemoryJobStatistics, MemoryUsageLogRepository).pipe(Layer.provideMerge(memoryRepositories))
  ).pipe(
    Layer.orDie
  ),
  liveClock: false
})
