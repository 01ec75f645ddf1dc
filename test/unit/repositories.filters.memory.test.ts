import { Layer, TestClock } from "effect"
import { lifecycleFiltersContract } from "../contract/AiJobLifecycleRepository.filters.contract.js"
import { outboxFiltersContract } from "../contract/OutboxRepository.filters.contract.js"
import { jobCreation, memoryRepositories } from "../support/foundationStack.js"

const harness = {
  name: "memory",
  layer: jobCreation(memoryRepositories).pipe(Layer.orDie),
  advance: (millis: number) => TestClock.adjust(millis),
  liveClock: false,
  lockTtlMs: 1_000
}

lifecycleFiltersContract(harness)
outboxFiltersContract(harness)
