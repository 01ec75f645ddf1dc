import { Queue } from "bullmq"
import { Duration, Effect, Option } from "effect"
import type { DomainEventsQueue } from "../../config/EventDeliverySettings.js"
import { type EventDelivery, EventDeliveryFailed, type EventTarget } from "../../services/outbox/EventTargets.js"
import { RedisConnection } from "../redis/RedisConnection.js"

/** How long a consumed event's queue job is kept: re-adding its id meanwhile is a no-op (BullMQ's dedupe). */
const keepFinishedSeconds = 24 * 60 * 60

/**
 * The domain-events queue as an `EventTarget` (docs/architecture.md §6.8): each terminal event
 * is added as a queue job named by its type, with the event as its data and the event id as its
 * job id, so adding it again (a retried round, a dispatcher that died before settling) is a
 * no-op while the job is kept. Finished jobs are kept a day for that reason. The queue lives on
 * the engine's Redis connection, under the engine's BullMQ prefix unless its consumers use another.
 */
export const makeDomainEventTarget = (config: DomainEventsQueue) =>
  Effect.gen(function*() {
    const redis = yield* RedisConnection
    const prefix = Option.getOrElse(config.prefix, () => redis.bullPrefix)
    const queue = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const opened = new Queue(config.queueName, { connection: redis.commands, prefix })
        // An EventEmitter 'error' without a listener would throw; the connection logs outages.
        opened.on("error", () => {})
        return opened
      }),
      (opened) => Effect.promise(() => opened.close()).pipe(Effect.timeoutOption(Duration.seconds(5)), Effect.asVoid)
    )
    const deliver = (delivery: EventDelivery) =>
      Effect.tryPromise({
        try: () =>
          queue.add(delivery.body.type, delivery.body, {
            jobId: delivery.eventId,
            removeOnComplete: { age: keepFinishedSeconds },
            removeOnFail: { age: keepFinishedSeconds }
          }),
        catch: (error) =>
          new EventDeliveryFailed({
            reason: `queue add failed (${error instanceof Error ? error.message : String(error)})`
          })
      }).pipe(Effect.asVoid)
    return {
      key: `queue:${prefix}:${config.queueName}`,
      label: `domain-events queue ${config.queueName}`,
      deliver
    } satisfies EventTarget
  })
