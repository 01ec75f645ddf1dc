import { Effect, Layer, Redacted } from "effect"
import { Redis } from "ioredis"
import { RedisConnection } from "../../src/layers/redis/RedisConnection.js"

/** The Redis the suite runs against; `TEST_REDIS_URL` points elsewhere. */
export const testRedisUrl = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379"

/** A port nothing listens on: Redis "unreachable". */
export const deadRedisUrl = "redis://127.0.0.1:1"

/** A key prefix no other test file (or run) will pick. */
export const uniqueRedisPrefix = (name: string) =>
  `t-${name.replace(/[^a-z0-9]/gi, "-").toLowerCase()}-${process.pid}-${Math.floor(Math.random() * 1e9)}`

/** Deletes every key under `prefix:` (SCAN, never KEYS). */
export const deleteRedisKeys = (prefix: string) =>
  Effect.acquireUseRelease(
    Effect.sync(() => new Redis(testRedisUrl, { maxRetriesPerRequest: 1 })),
    (client) =>
      Effect.promise(async () => {
        let cursor = "0"
        do {
          const [next, keys] = await client.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 500)
          cursor = next
          if (keys.length > 0) await client.del(...keys)
        } while (cursor !== "0")
      }),
    (client) => Effect.promise(() => client.quit()).pipe(Effect.ignore)
  )

/** `RedisConnection` on the test Redis under `prefix`; every key under it is deleted on release. */
export const testRedisLayer = (prefix: string) =>
  Layer.scopedContext(
    Effect.gen(function*() {
      yield* Effect.addFinalizer(() => deleteRedisKeys(prefix))
      return yield* Layer.build(RedisConnection.layer({ url: Redacted.make(testRedisUrl), prefix }))
    })
  )

/** `RedisConnection` on a dead port. */
export const deadRedisLayer = (prefix: string) => RedisConnection.layer({ url: Redacted.make(deadRedisUrl), prefix })
