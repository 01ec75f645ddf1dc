import { Context, Effect, Layer } from "effect"
import { CircuitBreakerSettings } from "../../../src/config/CircuitBreakerSettings.js"
import { RedisCircuitBreaker } from "../../../src/layers/redis/RedisCircuitBreaker.js"
import { ProviderCircuitBreaker } from "../../../src/services/ProviderCircuitBreaker.js"
import { providerCircuitBreakerContract } from "../../contract/ProviderCircuitBreaker.contract.js"
import { testRedisLayer, uniqueRedisPrefix } from "../../support/redis.js"

// Every process of the file shares one Redis key prefix, as the processes of one engine do.
providerCircuitBreakerContract({
  name: "redis",
  layer: testRedisLayer(uniqueRedisPrefix("breaker")),
  process: (settings) =>
    Effect.map(
      Layer.build(RedisCircuitBreaker.pipe(Layer.provide(CircuitBreakerSettings.make(settings)))),
      Context.get(ProviderCircuitBreaker)
    )
})
