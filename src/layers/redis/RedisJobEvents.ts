import { Effect, Either, Layer, Runtime, Schema, Scope } from "effect"
import { JobEventJson } from "../../domain/JobEvent.js"
import { JobEvents } from "../../services/JobEvents.js"
import { makeInProcessJobEvents } from "../memory/InProcessJobEvents.js"
import { RedisConnection } from "./RedisConnection.js"

const encodeEvent = Schema.encodeSync(JobEventJson)
const decodeEvent = Schema.decodeUnknownEither(JobEventJson)

/**
 * Job events across processes (docs/architecture.md §8.7) on `{prefix}:job:events:{jobId}`.
 * A publish is queued on the shared command connection without waiting for its reply (ioredis
 * keeps the order, so a job's events arrive as they were committed). A process that subscribes
 * opens one subscriber connection, on first use (a worker never does), whose pattern
 * subscription relays every job's events to the in-process topics.
 */
export const makeRedisJobEvents = Effect.gen(function*() {
  const redis = yield* RedisConnection
  const local = yield* makeInProcessJobEvents
  const runtime = yield* Effect.runtime<never>()
  const run = Runtime.runFork(runtime)
  const scope = yield* Effect.scope
  const channelPrefix = redis.key("job", "events", "")

  const listening = yield* Effect.cached(
    Effect.gen(function*() {
      const subscriber = yield* redis.open("subscriber").pipe(Scope.extend(scope))
      subscriber.on("pmessage", (_pattern: string, channel: string, message: string) => {
        if (!channel.startsWith(channelPrefix)) return
        Either.match(decodeEvent(message), {
          onLeft: () =>
            run(Effect.logWarning("job event ignored: it does not decode").pipe(Effect.annotateLogs({ channel }))),
          onRight: (event) => run(local.publish(event))
        })
      })
      yield* Effect.tryPromise(() => subscriber.psubscribe(`${channelPrefix}*`)).pipe(
        Effect.timeout("5 seconds"),
        Effect.catchAll(() =>
          Effect.logWarning("subscribing to job events failed; streams fall back on reading the job")
        )
      )
    })
  )

  return JobEvents.of({
    publish: (event) =>
      Effect.sync(() => {
        redis.commands.publish(`${channelPrefix}${event.jobId}`, encodeEvent(event)).catch(() =>
          run(Effect.logWarning("publishing a job event failed").pipe(Effect.annotateLogs({ jobId: event.jobId })))
        )
      }),
    subscribe: (jobId) => Effect.zipRight(listening, local.subscribe(jobId))
  })
})

/** JobEvents over Redis pub/sub; needs `RedisConnection`. */
export const RedisJobEvents = Layer.scoped(JobEvents, makeRedisJobEvents)
