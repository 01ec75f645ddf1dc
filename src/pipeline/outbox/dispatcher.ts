import { Chunk, Clock, Duration, Effect, Layer, Option, Schedule, Schema } from "effect"
import { DispatcherSettings, type DispatcherSettingsShape } from "../../config/DispatcherSettings.js"
import { TimingConfig } from "../../config/EngineConfig.js"
import { enqueueEventType, EnqueuePayload, type OutboxEvent } from "../../domain/OutboxEvent.js"
import type { QueueName } from "../../domain/QueueName.js"
import { storedPlacement } from "../../domain/TraceContext.js"
import { dispatchedEvents, dispatchLatency, increment, observe } from "../../services/EngineMetrics.js"
import { JobQueue, payloadFor } from "../../services/JobQueue.js"
import { OutboxRepository } from "../../services/outbox/OutboxRepository.js"
import { OutboxSignal } from "../../services/outbox/OutboxSignal.js"
import { makeEventDispatcher } from "./eventDispatcher.js"

/**
 * The delay before the `failure`-th retry (1-based), read off the retry Schedule: exponential
 * from `retryBaseDelay`, jittered, capped at `retryMaxDelay`.
 */
export const dispatchRetrySchedule = (settings: Pick<DispatcherSettingsShape, "retryBaseDelay" | "retryMaxDelay">) =>
  Schedule.exponential(settings.retryBaseDelay, 2).pipe(
    Schedule.jittered,
    Schedule.union(Schedule.spaced(settings.retryMaxDelay)),
    Schedule.delays
  )

/** The `failure`-th delay of the retry Schedule, in whole milliseconds as the outbox stores it. */
export const retryDelay = (
  settings: Pick<DispatcherSettingsShape, "retryBaseDelay" | "retryMaxDelay">,
  failure: number
) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const delays = yield* Schedule.run(
      dispatchRetrySchedule(settings),
      now,
      Array.from({ length: Math.max(1, failure) })
    )
    return Option.match(Chunk.last(delays), {
      onNone: () => settings.retryBaseDelay,
      onSome: (delay) => Duration.millis(Math.round(Duration.toMillis(delay)))
    })
  })

/** What one claimed event came to. */
export type DispatchOutcome = "published" | "retry_scheduled" | "dead" | "unknown_type" | "claim_lost"

export interface BatchSummary {
  readonly claimed: number
  readonly outcomes: Readonly<Record<DispatchOutcome, number>>
}

const decodeEnqueuePayload = Schema.decodeUnknown(EnqueuePayload)

/**
 * One dispatcher over the outbox (docs/architecture.md §6). `dispatchBatch` is one
 * claim-and-dispatch round; `run` is the background loop around it.
 */
export const makeDispatcher = Effect.gen(function*() {
  const outbox = yield* OutboxRepository
  const jobQueue = yield* JobQueue
  const signal = yield* OutboxSignal
  const timing = yield* TimingConfig
  const settings = yield* DispatcherSettings
  const dispatcherId = settings.dispatcherId

  const annotate = (event: OutboxEvent) =>
    Effect.annotateLogs({ dispatcherId, eventId: event.id, eventType: event.eventType, aggregateId: event.aggregateId })

  const failed = (event: OutboxEvent, error: string, maxAttempts: number) =>
    Effect.gen(function*() {
      const delay = yield* retryDelay(settings, event.attemptCount + 1)
      const outcome = yield* outbox.markDispatchFailed(event.id, dispatcherId, error, {
        retryDelay: delay,
        maxAttempts
      })
      return Option.getOrElse(outcome, (): DispatchOutcome => "claim_lost")
    })

  /**
   * Whether an add whose outcome is unknown did land: asked up to `addChecks` times while the
   * queue does not answer; `false` when it never answers (then the failure counts).
   */
  const addLanded = (queueName: QueueName, queueJobId: string) =>
    jobQueue.contains(queueName, queueJobId).pipe(
      Effect.retry(
        Schedule.spaced(Duration.millis(200)).pipe(Schedule.intersect(Schedule.recurs(settings.addChecks - 1)))
      ),
      Effect.orElseSucceed(() => false)
    )

  /** Added to the queue (or not ours to queue): to be marked published with the rest of the batch. */
  type EventResult = DispatchOutcome | "to_publish" | "unknown_to_publish"

  const dispatchEvent = (event: OutboxEvent): Effect.Effect<EventResult> =>
    Effect.gen(function*() {
      if (event.eventType !== enqueueEventType) {
        // Never block the outbox on an event nobody handles.
        yield* Effect.logWarning("Unknown outbox event type; marked published, nothing queued")
        return "unknown_to_publish" as const
      }
      const payload = yield* Effect.either(decodeEnqueuePayload(event.payload))
      if (payload._tag === "Left") {
        // It can never be queued: dead at once, for an operator to look at.
        yield* Effect.logError("Outbox enqueue payload does not decode; event marked dead")
        return yield* failed(event, "payload does not decode as { jobId, jobType, queueName, priority }", 1)
      }
      const queuePayload = payloadFor({
        jobId: payload.right.jobId,
        jobType: payload.right.jobType,
        createdAt: event.createdAt,
        redispatchOf: payload.right.redispatchOf,
        traceParent: event.traceParent
      })
      const queueJobId = queuePayload.dedupeKey
      const added = yield* Effect.either(
        jobQueue.add({ queueName: payload.right.queueName, payload: queuePayload, priority: payload.right.priority })
      )
      if (added._tag === "Right") return "to_publish" as const
      if (added.left.outcomeUnknown === true && (yield* addLanded(payload.right.queueName, queueJobId))) {
        yield* Effect.logInfo("Queue add went unanswered but the job is on the queue; published")
        return "to_publish" as const
      }
      const outcome = yield* failed(event, `${added.left._tag}: ${added.left.message}`, settings.maxAttempts)
      yield* Effect.logWarning("Queue add failed").pipe(
        Effect.annotateLogs({ outcome, attempt: event.attemptCount + 1, error: added.left.message })
      )
      return outcome
    }).pipe(
      // A storage error leaves the event `processing`: the lock TTL brings it back.
      Effect.catchAllCause((cause) =>
        Effect.logError("Dispatching an outbox event failed; its claim will expire", cause).pipe(
          Effect.as<EventResult>("claim_lost")
        )
      ),
      annotate(event),
      // A child of the job's stored context: the publish sits in the job's one trace.
      Effect.withSpan("dispatcher.publish", {
        kind: "producer",
        captureStackTrace: false,
        ...storedPlacement(event.traceParent),
        attributes: {
          "ai_job.id": event.aggregateId,
          "outbox.event_id": event.id,
          "messaging.system": "bullmq",
          dispatcherId
        }
      }),
      // The loops around run untraced (a poll is no one's trace); each publish is traced.
      Effect.withTracerEnabled(true)
    )

  /**
   * One claim of up to `batchSize` events and their dispatch. Uninterruptible, so a shutdown
   * finishes the batch it claimed (queue adds are bounded by their own timeout).
   */
  const dispatchBatch: Effect.Effect<BatchSummary> = Effect.uninterruptible(
    Effect.gen(function*() {
      const outcomes: Record<DispatchOutcome, number> = {
        published: 0,
        retry_scheduled: 0,
        dead: 0,
        unknown_type: 0,
        claim_lost: 0
      }
      const claimed = yield* outbox.claimBatch(dispatcherId, settings.batchSize).pipe(
        Effect.catchAll((error) =>
          Effect.logWarning("Claiming outbox events failed").pipe(
            Effect.annotateLogs({ dispatcherId, error: error.message }),
            Effect.as([])
          )
        )
      )
      const results = yield* Effect.forEach(claimed, dispatchEvent, { concurrency: settings.dispatchConcurrency })
      // Everything queued in this batch is marked published in one write.
      const toPublish = claimed.filter((_, index) =>
        results[index] === "to_publish" || results[index] === "unknown_to_publish"
      )
      const publishedCount = yield* outbox.markPublishedMany(toPublish.map((event) => event.id), dispatcherId).pipe(
        Effect.catchAll((error) =>
          Effect.logError("Marking a batch published failed; its claims will expire and it is queued again (a no-op)")
            .pipe(
              Effect.annotateLogs({ dispatcherId, error: error.message }),
              Effect.as(0)
            )
        )
      )
      // Commit → published, for the events this batch did publish (all of them, unless claims expired under it).
      const now = yield* Clock.currentTimeMillis
      for (const event of toPublish.slice(0, publishedCount)) {
        yield* observe(dispatchLatency, {}, Math.max(0, now - event.createdAt.getTime()) / 1000)
      }
      if (publishedCount > 0) yield* increment(dispatchedEvents, {}, publishedCount)
      for (const result of results) {
        if (result === "to_publish") outcomes.published += 1
        else if (result === "unknown_to_publish") outcomes.unknown_type += 1
        else outcomes[result] += 1
      }
      // A claim that expired under us while the batch ran was not ours to publish.
      const lost = toPublish.length - publishedCount
      if (lost > 0) {
        outcomes.claim_lost += lost
        outcomes.published = Math.max(0, outcomes.published - lost)
      }
      return { claimed: claimed.length, outcomes }
    })
  )

  const drain = Effect.iterate(0, {
    while: (claimed) => claimed >= 0,
    body: () => Effect.map(dispatchBatch, (summary) => (summary.claimed >= settings.batchSize ? 0 : -1))
  }).pipe(Effect.asVoid)

  /** Until a signal (a create committed, an operator replayed, claims were released) or the poll. */
  const wake = Effect.race(signal.await, Effect.sleep(timing.outboxPollInterval))

  const dispatchLoop = Effect.forever(Effect.zipRight(drain, wake))

  /** Every `releaseInterval`, claims older than the lock TTL go back to pending (§6.4). */
  const releaseLoop = outbox.releaseExpiredLocks(timing.outboxLockTtl).pipe(
    Effect.tap((released) =>
      released > 0
        ? Effect.logWarning("Released expired outbox claims").pipe(
          Effect.annotateLogs({ dispatcherId, released }),
          Effect.zipRight(signal.notify)
        )
        : Effect.void
    ),
    Effect.catchAll((error) =>
      Effect.logWarning("Releasing expired outbox claims failed").pipe(Effect.annotateLogs({ error: error.message }))
    ),
    // Derived from the claim's TTL too, so an abandoned claim is back within about 1.5 TTL.
    Effect.repeat(
      Schedule.spaced(
        Duration.min(
          settings.releaseInterval,
          Duration.millis(Math.max(1, Duration.toMillis(timing.outboxLockTtl) / 2))
        )
      )
    ),
    Effect.asVoid
  )

  /** Both loops as fibers of the caller's scope; closing it finishes the current batch. */
  const run = Effect.gen(function*() {
    yield* Effect.logInfo("Outbox dispatcher started").pipe(
      Effect.annotateLogs({
        dispatcherId,
        batchSize: settings.batchSize,
        pollMs: Duration.toMillis(timing.outboxPollInterval)
      })
    )
    // Registered first, so it runs last: after both loops have stopped. A claim still held then
    // (its batch cut short) goes back to pending now rather than after the claim TTL.
    yield* Effect.addFinalizer(() =>
      outbox.releaseClaimsOf(dispatcherId).pipe(
        Effect.tap((released) =>
          released > 0
            ? Effect.logWarning("Released this dispatcher's unfinished claims").pipe(
              Effect.annotateLogs({ released }),
              Effect.zipRight(signal.notify)
            )
            : Effect.void
        ),
        Effect.catchAll((error) =>
          Effect.logWarning("Releasing this dispatcher's claims failed; they expire with the claim TTL").pipe(
            Effect.annotateLogs({ error: error.message })
          )
        ),
        Effect.zipRight(Effect.logInfo("Outbox dispatcher stopped")),
        Effect.annotateLogs({ dispatcherId })
      )
    )
    yield* Effect.forkScoped(Effect.withTracerEnabled(releaseLoop, false))
    yield* Effect.forkScoped(Effect.withTracerEnabled(dispatchLoop, false))
  })

  return { dispatcherId, dispatchBatch, drain, run }
})

export type Dispatcher = Effect.Effect.Success<typeof makeDispatcher>

/**
 * The dispatcher running in the background for the layer's lifetime: its enqueue lane and its
 * notify lane, each claiming its own events. Closing stops the notify
 * lane first (its deliveries in flight finish), then the enqueue lane, then gives back any claim.
 */
export const OutboxDispatcherLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    yield* Effect.flatMap(makeDispatcher, (dispatcher) => dispatcher.run)
    yield* Effect.flatMap(makeEventDispatcher, (events) => events.run)
  })
)
