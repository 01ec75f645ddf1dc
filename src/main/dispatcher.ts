/**
 * `npm run start:dispatcher`: the outbox dispatcher as its own process (ADR 4.3-4.5). Moves
 * outbox events from MySQL (`DATABASE_URL`) into the BullMQ queues on Redis (`REDIS_URL`),
 * woken by Redis pub/sub after each create and polling every `OUTBOX_POLL_MS` as a safety net.
 * Run as many as you like: claims are compare-and-set, so each event is dispatched by one.
 *
 * On SIGTERM or SIGINT it finishes the batch it claimed, closes its queues and connections and
 * exits 0.
 */
import { Layer } from "effect"
import { BullMqJobQueueLive } from "../layers/bullmq/BullMqJobQueue.js"
import { StorageConfig, TimingConfig } from "../config/EngineConfig.js"
import { MysqlFromConfig } from "../layers/mysql/MysqlDatabase.js"
import { MysqlOutboxRepository } from "../layers/mysql/MysqlOutboxRepository.js"
import { QueueSettings } from "../config/QueueSettings.js"
import { RedisConnection } from "../layers/redis/RedisConnection.js"
import { RedisOutboxSignal } from "../layers/redis/RedisOutboxSignal.js"
import { OutboxDispatcherLive } from "../pipeline/dispatcher.js"
import { DispatcherSettings } from "../config/DispatcherSettings.js"
import { requireStorage, runProcess } from "./runProcess.js"

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
  Layer.provide(StorageConfig.layer),
  Layer.provide(requireStorage("the dispatcher"))
)

runProcess("dispatcher", DispatcherProcess)
