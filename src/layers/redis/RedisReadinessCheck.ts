import { Effect } from "effect"
import type { ReadinessCheck } from "../../services/ReadinessProbe.js"
import { RedisConnection } from "./RedisConnection.js"

/** `PING` on the shared command connection. */
export const redisCheck = Effect.map(RedisConnection, (redis): ReadinessCheck => ({
  name: "redis",
  backend: "redis",
  ping: Effect.tryPromise(() => redis.commands.ping())
}))
