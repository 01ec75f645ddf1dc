import { Effect, Layer, Runtime } from "effect"
import { CancelSignal } from "../../services/CancelSignal.js"
import { makeInProcessCancelSignal } from "../memory/InProcessCancelSignal.js"
import { RedisConnection } from "./RedisConnection.js"

/** The cancel marker lives five minutes, for a worker that looks after the message passed. */
const cancelMarkerTtlSeconds = 300

/**
 * The cancel signal across processes (docs/architecture.md §10): `publish` sets `{prefix}:job:cancel:{jobId}` (TTL 5 min) and
 * publishes on that channel; every process's pattern subscription relays it to its own waiters.
 */
export const makeRedisCancelSignal = Effect.gen(function*() {
  const redis = yield* RedisConnection
  const local = yield* makeInProcessCancelSignal
  const runtime = yield* Effect.runtime<never>()
  const scope = yield* Effect.scope
  const channelPrefix = redis.key("job", "cancel", "")
  const subscriber = yield* redis.open("subscriber")
  subscriber.on("pmessage", (_pattern: string, channel: string) => {
    if (channel.startsWith(channelPrefix)) Runtime.runFork(runtime)(local.publish(channel.slice(channelPrefix.length)))
  })
  yield* Effect.tryPromise(() => subscriber.psubscribe(`${channelPrefix}*`)).pipe(
    Effect.catchAll((error) =>
      Effect.logWarning("Subscribing to cancel requests failed; lease beats will still see them").pipe(
        Effect.annotateLogs({ error: error.message })
      )
    ),
    Effect.forkIn(scope)
  )

  const publish = (jobId: string) =>
    Effect.zipRight(
      local.publish(jobId),
      Effect.tryPromise(() =>
        redis.commands.multi().set(`${channelPrefix}${jobId}`, "1", "EX", cancelMarkerTtlSeconds)
          .publish(`${channelPrefix}${jobId}`, "1").exec()
      ).pipe(
        Effect.timeout("2 seconds"),
        Effect.catchAll(() =>
          Effect.logWarning("Publishing a cancel request failed; the worker's next lease beat will see it").pipe(
            Effect.annotateLogs({ jobId })
          )
        )
      )
    )

  return CancelSignal.of({ publish, await: local.await, subscribe: local.subscribe })
})

/** CancelSignal over Redis pub/sub; needs `RedisConnection`. */
export const RedisCancelSignal = Layer.scoped(CancelSignal, makeRedisCancelSignal)
