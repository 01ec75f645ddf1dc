import { Effect, Layer } from "effect"
import { lifecycleFiltersContract } from "../contract/AiJobLifecycleRepository.filters.contract.js"
import { outboxFiltersContract } from "../contract/OutboxRepository.filters.contract.js"
import { jobCreation, mysqlRepositories } from "../support/foundationStack.js"

const harness = {
  name: "mysql",
  layer: jobCreation(mysqlRepositories("filters")).pipe(Layer.orDie),
  /** Against MariaDB the database's clock rules, so time has to pass for real. */
  advance: (millis: number) => Effect.sleep(millis),
  liveClock: true,
  lockTtlMs: 300
}

lifecycleFiltersContract(harness)
outboxFiltersContract(harness)
