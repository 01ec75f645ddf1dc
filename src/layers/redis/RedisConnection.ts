import { Context, Duration, Effect, Layer, Option, Redacted, Runtime, type Scope } from "effect"
import { Redis, type RedisOptions } from "ioredis"
import { defaultRedisPrefix, StorageConfig } from "../../config/EngineConfig.js"

/**
 * What a connection is for:
 * - `command`: short commands (queue adds, counts, PUBLISH). Commands issued while Redis is
 *   down are retried a few times across reconnects, then fail; callers add their own timeout.
 * - `blocking`: a BullMQ worker's connection. `maxRetriesPerRequest: null` as BullMQ requires,
 *   so blocking reads survive reconnects.
 * - `subscriber`: pub/sub. Also `maxRetriesPerRequest: null`; ioredis re-subscribes on reconnect.
 */
export type RedisConnectionKind = "command" | "blocking" | "subscriber"

export interface RedisConnectionShape {
  /**
   * The namespace of every key and channel the engine uses in Redis, so that two engines (or
   * two test files) can share one Redis. BullMQ keys live under `bullPrefix`.
   */
  readonly prefix: string
  /** BullMQ's `prefix` option: `{prefix}:bull` (ioredis' own `keyPrefix` is not supported by BullMQ). */
  readonly bullPrefix: string
  /** `{prefix}:{parts joined by ':'}`: a key or channel name inside the namespace. */
  readonly key: (...parts: ReadonlyArray<string>) => string
  /** A shared `command` connection, closed with the layer. */
  readonly commands: Redis
  /**
   * A new connection owned by the caller's scope: closed (QUIT, then hard close) when it ends.
   * `commandTimeout` makes each command on it fail after that long (ioredis' own timer).
   */
  readonly open: (
    kind: RedisConnectionKind,
    options?: { readonly commandTimeout?: Duration.Duration }
  ) => Effect.Effect<Redis, never, Scope.Scope>
}

/**
 * ioredis connections to `REDIS_URL` as scoped resources. Connections are made in the
 * background and retried forever with ioredis' backoff: a Redis that is down at start or goes
 * away later only makes commands fail (logged once per outage), it never stops the process.
 * Log lines name the connection's purpose, never the URL (it may hold a password).
 */
export class RedisConnection extends Context.Tag("ai-job-engine/RedisConnection")<
  RedisConnection,
  RedisConnectionShape
>() {
  static readonly layer = (options: { readonly url: Redacted.Redacted<string>; readonly prefix?: string }) =>
    Layer.scoped(RedisConnection, makeRedisConnection(options.url, options.prefix ?? defaultRedisPrefix))

  /** `REDIS_URL` (required here) and `REDIS_KEY_PREFIX` (default `aije`). */
  static readonly fromConfig = Layer.unwrapEffect(
    Effect.gen(function*() {
      const storage = yield* StorageConfig
      return Option.match(storage.redisUrl, {
        onNone: () => Layer.die(new Error("REDIS_URL is not set: the Redis layers need it")),
        onSome: (url) => RedisConnection.layer({ url, prefix: storage.redisKeyPrefix })
      })
    })
  )
}

const optionsFor = (kind: RedisConnectionKind, commandTimeout: Duration.Duration | undefined): RedisOptions => ({
  lazyConnect: false,
  ...(commandTimeout === undefined ? {} : { commandTimeout: Duration.toMillis(commandTimeout) }),
  // Background reconnects, forever, at most every 2 s.
  retryStrategy: (times) => Math.min(times * 100, 2_000),
  maxRetriesPerRequest: kind === "command" ? 2 : null,
  connectionName: `ai-job-engine-${kind}`
})

const closeGracefully = (client: Redis) =>
  Effect.gen(function*() {
    if (client.status === "ready") {
      const quit = yield* Effect.tryPromise(() => client.quit()).pipe(
        Effect.timeoutOption(Duration.seconds(2)),
        Effect.option
      )
      if (Option.isSome(quit) && Option.isSome(quit.value)) return
    }
    yield* Effect.sync(() => client.disconnect(false))
  })

export const makeRedisConnection = (url: Redacted.Redacted<string>, prefix: string) =>
  Effect.gen(function*() {
    const runtime = yield* Effect.runtime<never>()
    const log = Runtime.runFork(runtime)

    const open = (
      kind: RedisConnectionKind,
      options?: { readonly commandTimeout?: Duration.Duration }
    ): Effect.Effect<Redis, never, Scope.Scope> =>
      Effect.acquireRelease(
        Effect.sync(() => {
          const client = new Redis(Redacted.value(url), optionsFor(kind, options?.commandTimeout))
          // One warning per outage: ioredis emits an error on every failed reconnect.
          let reported = false
          client.on("error", (error: Error) => {
            if (reported) return
            reported = true
            log(
              Effect.logWarning("Redis connection error; reconnecting in the background").pipe(
                Effect.annotateLogs({ redisConnection: kind, error: error.message })
              )
            )
          })
          client.on("ready", () => {
            if (!reported) return
            reported = false
            log(Effect.logInfo("Redis connection restored").pipe(Effect.annotateLogs({ redisConnection: kind })))
          })
          return client
        }),
        closeGracefully
      )

    const commands = yield* open("command")
    return RedisConnection.of({
      prefix,
      bullPrefix: `${prefix}:bull`,
      key: (...parts) => [prefix, ...parts].join(":"),
      commands,
      open
    })
  })
