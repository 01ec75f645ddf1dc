import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { RedisConnection } from "../../../src/layers/redis/RedisConnection.js"
import { RedisWorkerDirectory } from "../../../src/layers/redis/RedisWorkerDirectory.js"
import { WorkerDirectory } from "../../../src/services/WorkerDirectory.js"
import { testRedisLayer, uniqueRedisPrefix } from "../../support/redis.js"

const heartbeat = (instanceId: string) => ({
  instanceId,
  hostname: "host-1",
  pid: 42,
  queues: ["ai-interactive"],
  jobIds: [`${instanceId}-job`],
  startedAt: "2026-01-01T00:00:00.000Z",
  beatAt: "2026-01-01T00:00:01.000Z"
})

const TestLayer = RedisWorkerDirectory.pipe(Layer.provideMerge(testRedisLayer(uniqueRedisPrefix("worker-directory"))))

layer(TestLayer, { excludeTestServices: true })("the Redis worker directory (no SCAN)", (it) => {
  it.effect("lists the workers that beat, forgets removed ones and ones whose heartbeat key expired", () =>
    Effect.gen(function*() {
      const directory = yield* WorkerDirectory
      const redis = yield* RedisConnection
      expect(yield* directory.live).toEqual([])
      yield* directory.beat(heartbeat("worker-b"))
      yield* directory.beat(heartbeat("worker-a"))
      yield* directory.beat(heartbeat("worker-c"))
      expect((yield* directory.live).map((worker) => worker.instanceId)).toEqual(["worker-a", "worker-b", "worker-c"])
      expect(yield* directory.live).toContainEqual(heartbeat("worker-a"))

      yield* directory.remove("worker-b")
      // An expired heartbeat key: its index entry no longer counts.
      yield* Effect.promise(() => redis.commands.del(redis.key("worker", "heartbeat", "worker-c")))
      expect((yield* directory.live).map((worker) => worker.instanceId)).toEqual(["worker-a"])
      // The index lives under the prefix with the heartbeat keys, and forgets a removed worker.
      expect(yield* Effect.promise(() => redis.commands.zrange(redis.key("worker", "heartbeats"), 0, -1))).toEqual([
        "worker-a",
        "worker-c"
      ])
      // No key outlives its use: the index expires a heartbeat's life after the last beat.
      const ttl = yield* Effect.promise(() => redis.commands.pttl(redis.key("worker", "heartbeats")))
      expect(ttl).toBeGreaterThan(0)
      expect(ttl).toBeLessThanOrEqual(90_000)
    }))
})
