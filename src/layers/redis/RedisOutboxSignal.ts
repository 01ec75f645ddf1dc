import { Effect, Layer, Runtime } from "effect"
import { OutboxSignal } from "../../services/outbox/OutboxSignal.js"
import { makeInProcessOutboxSignal } from "../memory/InProcessOutboxSignal.js"
import { RedisConnection } from "./RedisConnection.js"

/**
 * The dispatcher's wake-up (docs/architecture.md §6.6) across processes: `notify` wakes this process's dispatcher at once and
 * publishes on `{prefix}:outbox:wake`; every process subscribed to that channel wakes its own.
 * The publish is not awaited, so a slow or absent Redis never delays the caller; a lost signal costs at most one poll interval.
 */
export const makeRedisOutboxSignal = Effect.gen(function*() {
  const redis = yield* RedisConnection
  const local = yield* makeInProcessOutboxSignal
  const runtime = yield* Effect.runtime<never>()
  const scope = yield* Effect.scope
  const channel = redis.key("outbox", "wake")

  const subscriber = yield* redis.open("subscriber")
  subscriber.on("message", (from: string) => {
    if (from === channel) Runtime.runFork(runtime)(local.notify)
  })
  // ioredis re-subscribes after a reconnect; if Redis is down now, the subscription waits for it.
  yield* Effect.tryPromise(() => subscriber.subscribe(channel)).pipe(
    Effect.catchAll((error) =>
      Effect.logWarning("Subscribing to the outbox wake-up channel failed; polling only").pipe(
        Effect.annotateLogs({ error: error.message })
      )
    ),
    Effect.forkIn(scope)
  )

  // Issued synchronously and not awaited: the command is on the connection before `notify`
  // returns (so it survives a scope that closes right after), and the caller never waits.
  const publish = Effect.sync(() => {
    redis.commands.publish(channel, "1").catch(() =>
      Runtime.runFork(runtime)(Effect.logDebug("Publishing the outbox wake-up failed; the poll will pick the event up"))
    )
  })

  return OutboxSignal.of({
    notify: Effect.zipRight(local.notify, publish),
    await: local.await
  })
})

/** OutboxSignal over Redis pub/sub (and in-process); needs `RedisConnection`. */
export const RedisOutboxSignal = Layer.scoped(OutboxSignal, makeRedisOutboxSignal)
