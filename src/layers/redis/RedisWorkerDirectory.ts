import { Clock, Effect, Layer, Option, Schema } from "effect"
import { WorkerDirectory, WorkerHeartbeat } from "../../services/WorkerDirectory.js"
import { RedisConnection } from "./RedisConnection.js"

/** `worker:heartbeat:{instanceId}` with a 90 s TTL (under the engine's key prefix; docs/architecture.md §4.3). */
const heartbeatTtlSeconds = 90

const decodeHeartbeat = Schema.decodeUnknownOption(Schema.parseJson(WorkerHeartbeat))

/**
 * Beside each heartbeat key, a sorted set `worker:heartbeats` of instance ids scored by when
 * their key expires: the list reads it instead of SCAN, which the engine's Redis user is not
 * granted (SCAN would show every key name on the server, whatever the user's key patterns).
 * The heartbeat key stays the truth: an id whose key has expired reads as gone.
 */
export const RedisWorkerDirectory = Layer.effect(
  WorkerDirectory,
  Effect.gen(function*() {
    const redis = yield* RedisConnection
    const keyOf = (instanceId: string) => redis.key("worker", "heartbeat", instanceId)
    const index = redis.key("worker", "heartbeats")

    const quietly = <A>(operation: string, run: () => Promise<A>) =>
      Effect.tryPromise(run).pipe(
        Effect.timeout("2 seconds"),
        Effect.tapError(() =>
          Effect.logWarning("Redis worker directory unavailable").pipe(Effect.annotateLogs({ operation }))
        ),
        Effect.option
      )

    return WorkerDirectory.of({
      beat: (heartbeat) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          quietly("beat", () =>
            redis.commands
              .multi()
              .set(keyOf(heartbeat.instanceId), JSON.stringify(heartbeat), "EX", heartbeatTtlSeconds)
              .zadd(index, now + heartbeatTtlSeconds * 1000, heartbeat.instanceId)
              .zremrangebyscore(index, "-inf", now)
              // The index outlives its last beat by one heartbeat's life, no longer.
              .pexpire(index, heartbeatTtlSeconds * 1000)
              .exec())).pipe(Effect.asVoid),
      remove: (instanceId) =>
        quietly("remove", () => redis.commands.multi().del(keyOf(instanceId)).zrem(index, instanceId).exec()).pipe(
          Effect.asVoid
        ),
      live: Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const ids = Option.getOrElse(
          yield* quietly("list", () => redis.commands.zrangebyscore(index, now, "+inf")),
          () => []
        )
        if (ids.length === 0) return []
        const values = yield* quietly("mget", () => redis.commands.mget(...ids.map(keyOf)))
        return Option.getOrElse(values, () => []).flatMap((value) =>
          value === null ? [] : Option.toArray(decodeHeartbeat(value))
        ).sort((a, b) => a.instanceId.localeCompare(b.instanceId))
      })
    })
  })
)
