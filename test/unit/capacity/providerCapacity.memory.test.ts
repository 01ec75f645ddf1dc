import { Context, Effect, Layer } from "effect"
import { ProviderLimitsConfig } from "../../../src/config/ProviderLimitsConfig.js"
import { MemoryCapacityStore, MemoryProviderCapacity } from "../../../src/layers/memory/MemoryProviderCapacity.js"
import { ProviderCapacity } from "../../../src/services/ProviderCapacity.js"
import { providerCapacityContract } from "../../contract/ProviderCapacity.contract.js"

providerCapacityContract({
  name: "memory",
  layer: MemoryCapacityStore.layer,
  worker: (limits) =>
    Effect.map(
      Layer.build(MemoryProviderCapacity().pipe(Layer.provide(ProviderLimitsConfig.make(limits)))),
      Context.get(ProviderCapacity)
    )
})
