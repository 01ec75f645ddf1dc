import { Layer, TestClock } from "effect"
import { lifecycleRepositoryContract } from "../contract/AiJobLifecycleRepository.contract.js"
import { outboxRepositoryContract } from "../contract/OutboxRepository.contract.js"
import { jobCreation, memoryRepositories } from "../support/foundationStack.js"

const harness = {
  name: "memory",
  layer: jobCreation(memoryRepositories).pipe(Layer.orDie),
  advance: (millis: number) => TestClock.adjust(millis),
  lockTtlMs: 1_000
}

lifecycleRepositoryContract(harness)
outboxRepositoryContract(harness)
