import { Duration, Effect, HashMap, Layer, Option, Ref } from "effect"
import { DispatcherSettings } from "../../src/config/DispatcherSettings.js"
import { TimingConfig } from "../../src/config/EngineConfig.js"
import { QueueSettings } from "../../src/config/QueueSettings.js"
import { newId } from "../../src/domain/Ids.js"
import { enqueueEventType } from "../../src/domain/OutboxEvent.js"
import type { QueueName } from "../../src/domain/QueueName.js"
import { BullMqJobQueueLive } from "../../src/layers/bullmq/BullMqJobQueue.js"
import { InProcessOutboxSignal } from "../../src/layers/memory/InProcessOutboxSignal.js"
import type { RedisConnection } from "../../src/layers/redis/RedisConnection.js"
import { makeDispatcher } from "../../src/pipeline/outbox/dispatcher.js"
import { JobQueue } from "../../src/services/JobQueue.js"
import { OutboxRepository } from "../../src/services/outbox/OutboxRepository.js"
import type { OutboxSignal } from "../../src/services/outbox/OutboxSignal.js"
import { UnitOfWork } from "../../src/services/UnitOfWork.js"

/** Successful adds per AiJob id, across every dispatcher that shares the Ref. */
export type AddCounter = Ref.Ref<HashMap.HashMap<string, number>>

export const makeAddCounter = Ref.make(HashMap.empty<string, number>())

/** Wraps the JobQueue beneath it so that every successful add is counted (the race test's evidence). */
export const countingJobQueue = (counter: AddCounter) =>
  Layer.effect(
    JobQueue,
    Effect.map(JobQueue, (inner) =>
      JobQueue.of({
        ...inner,
        add: (request) =>
          inner.add(request).pipe(
            Effect.tap(() =>
              Ref.update(counter, (counts) =>
                HashMap.set(
                  counts,
                  request.payload.jobId,
                  Option.getOrElse(HashMap.get(counts, request.payload.jobId), () => 0) + 1
                ))
            )
          )
      }))
  )

export interface DispatcherOptions {
  readonly dispatcherId: string
  readonly redis: Layer.Layer<RedisConnection>
  readonly counter?: AddCounter
  readonly settings?: Partial<DispatcherSettings["Type"]>
  readonly timing?: Partial<TimingConfig["Type"]>
  readonly addTimeoutMs?: number
  /** The wake-up; an in-process one by default. */
  readonly signal?: Layer.Layer<OutboxSignal>
}

/**
 * A dispatcher running in the caller's scope on the repositories in context, with its own
 * BullMQ queues on `redis` and its own in-process signal.
 */
export const runDispatcher = (options: DispatcherOptions) => {
  const bullmq = BullMqJobQueueLive.pipe(
    Layer.provide(
      Layer.merge(options.redis, QueueSettings.make({ addTimeout: Duration.millis(options.addTimeoutMs ?? 2_000) }))
    )
  )
  const queue = options.counter === undefined ? bullmq : countingJobQueue(options.counter).pipe(Layer.provide(bullmq))
  const layers = Layer.mergeAll(
    queue,
    options.signal ?? InProcessOutboxSignal,
    TimingConfig.make({ outboxPollInterval: Duration.millis(50), ...options.timing }),
    DispatcherSettings.make({ dispatcherId: options.dispatcherId, ...options.settings })
  )
  // Built into the caller's scope: the dispatcher's fibers and connections live as long as it.
  return Effect.gen(function*() {
    const context = yield* Layer.build(layers)
    yield* Effect.flatMap(makeDispatcher, (dispatcher) => dispatcher.run).pipe(Effect.provide(context))
  })
}

/** An outbox event written (and committed) directly, as AiJobService would write it. */
export const writeEnqueueEvent = (
  options: {
    readonly jobId?: string
    readonly queueName?: QueueName
    readonly eventType?: string
    readonly payload?: unknown
  } = {}
) =>
  Effect.gen(function*() {
    const unitOfWork = yield* UnitOfWork
    const outbox = yield* OutboxRepository
    const jobId = options.jobId ?? (yield* newId)
    const eventType = options.eventType ?? enqueueEventType
    const id = yield* newId
    yield* unitOfWork.transaction(
      outbox.createInTransaction({
        id,
        eventType,
        aggregateType: "AiJob",
        aggregateId: jobId,
        dedupeKey: `${eventType}:${jobId}`,
        payload: options.payload ?? {
          jobId,
          jobType: "synthetic_echo",
          queueName: options.queueName ?? "ai-interactive",
          priority: 50
        },
        delay: Duration.zero
      })
    )
    return { eventId: id, jobId }
  })

/** Polls (real time) until `done` holds. */
export const waitUntil = <A, E, R>(
  check: Effect.Effect<A, E, R>,
  done: (a: A) => boolean,
  options: { readonly timeout?: Duration.DurationInput; readonly every?: Duration.DurationInput } = {}
) =>
  Effect.gen(function*() {
    const deadline = Duration.toMillis(options.timeout ?? Duration.seconds(20))
    const every = options.every ?? Duration.millis(25)
    let waited = 0
    while (true) {
      const value = yield* check
      if (done(value)) return value
      if (waited >= deadline) return yield* Effect.dieMessage(`condition not reached within ${deadline} ms`)
      yield* Effect.sleep(every)
      waited += Duration.toMillis(every)
    }
  })
