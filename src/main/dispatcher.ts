/**
 * `npm run start:dispatcher`: the outbox dispatcher as its own process (ADR 4.3-4.5). Moves
 * outbox events from MySQL (`DATABASE_URL`) into the BullMQ queues on Redis (`REDIS_URL`),
 * woken by Redis pub/sub after each create and polling every `OUTBOX_POLL_MS` as a safety net.
 * Run as many as you like: claims are compare-and-set, so each event is dispatched by one.
 *
 * On SIGTERM or SIGINT it finishes the batch it claimed, closes its queues and connections and
 * exits 0.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Cause, ConfigError, Console, Data, Effect, Layer, Option } from "effect"
import { BullMqJobQueueLive } from "../layers/bullmq/BullMqJobQueue.js"
import { StorageConfig, TimingConfig } from "../layers/config.js"
import { MysqlFromConfig } from "../layers/mysql/MysqlDatabase.js"
import { MysqlOutboxRepository } from "../layers/mysql/MysqlOutboxRepository.js"
import { QueueSettings } from "../layers/queueSettings.js"
import { RedisConnection } from "../layers/redis/RedisConnection.js"
import { RedisOutboxSignal } from "../layers/redis/RedisOutboxSignal.js"
import { DispatcherSettings, OutboxDispatcherLive } from "../pipeline/dispatcher.js"

class StorageMissing extends Data.TaggedError("StorageMissing")<{ readonly variables: ReadonlyArray<string> }> {
  override get message() {
    return `${this.variables.join(" and ")} must be set: the dispatcher reads MySQL and writes to Redis`
  }
}

/** Fails with one readable line before any connection is attempted. */
const requireStorage = Layer.effectDiscard(
  Effect.gen(function* () {
    const storage = yield* StorageConfig
    const missing = [
      ...(Option.isNone(storage.databaseUrl) ? ["DATABASE_URL"] : []),
      ...(Option.isNone(storage.redisUrl) ? ["REDIS_URL"] : [])
    ]
    if (missing.length > 0) return yield* Effect.fail(new StorageMissing({ variables: missing }))
  })
)

const redis = RedisConnection.fromConfig

const DispatcherProcess = OutboxDispatcherLive.pipe(
  Layer.provide(
    Layer.mergeAll(
      MysqlOutboxRepository.pipe(Layer.provide(MysqlFromConfig)),
      BullMqJobQueueLive.pipe(Layer.provide(Layer.merge(redis, QueueSettings.layer))),
      RedisOutboxSignal.pipe(Layer.provide(redis)),
      TimingConfig.layer,
      DispatcherSettings.layer
    )
  ),
  Layer.provide(requireStorage),
  Layer.provide(StorageConfig.layer)
)

const reportFailure = <E>(cause: Cause.Cause<E>) =>
  Cause.isInterruptedOnly(cause)
    ? Effect.void
    : Console.error(
      Option.match(Cause.failureOption(cause), {
        onNone: () => Cause.pretty(cause),
        onSome: (error) =>
          ConfigError.isConfigError(error)
            ? `dispatcher: ${String(error)}`
            : error instanceof Error
            ? `dispatcher: ${error.message}`
            : `dispatcher: ${String(error)}`
      })
    )

Layer.launch(DispatcherProcess).pipe(
  Effect.tapErrorCause(reportFailure),
  (program) => NodeRuntime.runMain(program, { disableErrorReporting: true })
)
