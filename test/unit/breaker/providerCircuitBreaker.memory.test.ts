import { Context, Effect, Layer } from "effect"
import { CircuitBreakerSettings } from "../../../src/config/CircuitBreakerSettings.js"
import { MemoryBreakerStore, MemoryCircuitBreaker } from "../../../src/layers/memory/MemoryCircuitBreaker.js"
import { ProviderCircuitBreaker } from "../../../src/services/ProviderCircuitBreaker.js"
import { providerCircuitBreakerContract } from "../../contract/ProviderCircuitBreaker.contract.js"

// Every process of the file shares one store, as the processes of one engine share Redis.
providerCircuitBreakerContract({
  name: "memory",
  layer: MemoryBreakerStore.layer,
  process: (settings) =>
    Effect.map(
      Layer.build(MemoryCircuitBreaker.pipe(Layer.provide(CircuitBreakerSettings.make(settings)))),
      Context.get(ProviderCircuitBreaker)
    )
})
