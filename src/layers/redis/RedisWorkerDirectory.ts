import { Effect, Layer, Option, Schema } from "effect"
import { WorkerDirectory, WorkerHeartbeat } from "../../services/WorkerDirectory.js"
import { RedisConnection } from "./RedisConnection.js"

/** ADR 8.2: `worker:heartbeat:{instanceId}` with a 90 s TTL (under the engine's key prefix). */
const heartbeatTtlSeconds = 90

const decodeHeartbeat = Schema.decodeUnknownOption(Schema.parseJson(WorkerHeartbeat))

export const RedisWorkerDirectory = Layer.effect(
  WorkerDirectory,
  Effect.gen(function* () {
    const redis = yield* RedisConnection
    const keyOf = (instanceId: string) => redis.key("worker", "heartbeat", instanceId)
    const pattern = redis.key("worker", "heartbeat", "*")

    const quietly = <A>(operation: string, run: () => Promise<A>) =>
      Effect.tryPromise(run).pipe(
        Effect.timeout("2 seconds"),
        Effect.tapError(() => Effect.logWarning("Redis worker directory unavailable").pipe(Effect.annotateLogs({ operation }))),
        Effect.option
      )

    const scanKeys = Effect.gen(function* () {
      const keys: Array<string> = []
      let cursor = "0"
      do {
        const page = yield* quietly("scan", () => redis.commands.scan(cursor, "MATCH", pattern, "COUNT", 200))
        if (Option.isNone(page)) return keys
        cursor = page.value[0]
        keys.push(...page.value[1])
      } while (cursor !== "0")
      return keys
    })

    return WorkerDirectory.of({
      beat: (heartbeat) =>
        quietly("beat", () =>
          redis.commands.set(keyOf(heartbeat.instanceId), JSON.stringify(heartbeat), "EX", heartbeatTtlSeconds)).pipe(
            Effect.asVoid
          ),
      remove: (instanceId) => quietly("remove", () => redis.commands.del(keyOf(instanceId))).pipe(Effect.asVoid),
      live: Effect.gen(function* () {
        const keys = yield* scanKeys
        if (keys.length === 0) return []
        const values = yield* quietly("mget", () => redis.commands.mget(...keys))
        return Option.getOrElse(values, () => []).flatMap((value) =>
          value === null ? [] : Option.toArray(decodeHeartbeat(value))
        ).sort((a, b) => a.instanceId.localeCompare(b.instanceId))
      })
    })
  })
)
