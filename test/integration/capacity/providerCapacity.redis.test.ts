import { Context, Effect, Layer } from "effect"
import { ProviderLimitsConfig } from "../../../src/config/ProviderLimitsConfig.js"
import { makeRedisCapacityStore, RedisProviderCapacity } from "../../../src/layers/redis/RedisProviderCapacity.js"
import { ProviderCapacity } from "../../../src/services/ProviderCapacity.js"
import { capacityStoreRefusalsContract, StoreUnderTest } from "../../contract/CapacityStoreRefusals.contract.js"
import { providerCapacityContract } from "../../contract/ProviderCapacity.contract.js"
import { testRedisLayer, uniqueRedisPrefix } from "../../support/redis.js"

// Every worker of the file shares one Redis key prefix, as the workers of one engine do.
providerCapacityContract({
  name: "redis",
  layer: testRedisLayer(uniqueRedisPrefix("capacity")),
  worker: (limits) =>
    Effect.map(
      Layer.build(RedisProviderCapacity().pipe(Layer.provide(ProviderLimitsConfig.make(limits)))),
      Context.get(ProviderCapacity)
    )
})

capacityStoreRefusalsContract(
  "redis",
  Layer.scoped(StoreUnderTest, makeRedisCapacityStore).pipe(
    Layer.provide(testRedisLayer(uniqueRedisPrefix("capacity-refusals")))
  )
)
