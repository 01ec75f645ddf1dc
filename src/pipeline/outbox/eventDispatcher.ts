import { Chunk, Clock, Duration, Effect, Either, FiberSet, Option, Queue, Ref, Schedule, Schema } from "effect"
import { DispatcherSettings } from "../../config/DispatcherSettings.js"
import { TimingConfig } from "../../config/EngineConfig.js"
import { EventDeliverySettings, type EventDeliverySettingsShape } from "../../config/EventDeliverySettings.js"
import { JobFinishedEvent } from "../../domain/JobFinishedEvent.js"
import type { OutboxEvent } from "../../domain/OutboxEvent.js"
import { storedPlacement } from "../../domain/TraceContext.js"
import { EventDeliveryFailed, type EventTarget, EventTargets } from "../../services/outbox/EventTargets.js"
import {
  type DeliveryOutcome,
  type DeliverySettlement,
  OutboxRepository
} from "../../services/outbox/OutboxRepository.js"

type RetrySettings = Pick<EventDeliverySettingsShape, "retryBaseDelay" | "retryMaxDelay" | "retryFor">

/** The retry delays: exponential from the base, doubling, jittered when asked, capped at the maximum. */
const retryDelays = (settings: RetrySettings, jittered: boolean) =>
  Schedule.exponential(settings.retryBaseDelay, 2).pipe(
    (schedule) => (jittered ? Schedule.jittered(schedule) : schedule),
    Schedule.union(Schedule.spaced(settings.retryMaxDelay)),
    Schedule.delays
  )

/** The first `rounds` delays of the schedule. */
const firstDelays = (settings: RetrySettings, jittered: boolean, rounds: number) =>
  Effect.flatMap(
    Clock.currentTimeMillis,
    (now) => Schedule.run(retryDelays(settings, jittered), now, Array.from({ length: rounds }))
  ).pipe(
    Effect.map((delays) => Chunk.toReadonlyArray(Chunk.take(delays, rounds)).map(Duration.toMillis))
  )

/**
 * The delay before the round after the `failure`-th failed one (1-based), jittered as the
 * enqueue lane's; None once the schedule's delays up to it add up to more than `retryFor` (the
 * event is then dead). The bound is read off the delays without jitter, so it is the same
 * number of rounds every time.
 */
export const eventRetryDelay = (settings: RetrySettings, failure: number) =>
  Effect.gen(function*() {
    const rounds = Math.max(1, failure)
    const spent = (yield* firstDelays(settings, false, rounds)).reduce((total, delay) => total + delay, 0)
    if (spent > Duration.toMillis(settings.retryFor)) return Option.none<Duration.Duration>()
    const jittered = yield* firstDelays(settings, true, rounds)
    // Whole milliseconds, as the outbox stores the time.
    return Option.some(
      Duration.millis(Math.round(jittered[jittered.length - 1] ?? Duration.toMillis(settings.retryBaseDelay)))
    )
  })

const decodeBody = Schema.decodeUnknown(JobFinishedEvent)

/** What one claimed event came to; `claim_lost` when its outcome could not be written as ours. */
export type EventRoundOutcome = DeliveryOutcome | "claim_lost"

/**
 * The notify lane of one dispatcher (docs/architecture.md §6.8): delivers jobs' terminal events to
 * every target not yet acknowledged. It claims apart from the enqueue lane, so no endpoint can hold
 * up a job; a refused round retries on its own back-off until the retry time is spent, then `dead`.
 */
export const makeEventDispatcher = Effect.gen(function*() {
  const outbox = yield* OutboxRepository
  const targets = yield* EventTargets
  const timing = yield* TimingConfig
  const settings = yield* EventDeliverySettings
  const { batchSize, dispatcherId } = yield* DispatcherSettings

  const deliverTo = (target: EventTarget, event: OutboxEvent, body: JobFinishedEvent) =>
    target.deliver({ eventId: event.id, body }).pipe(
      // The round is uninterruptible (a shutdown lets it settle); the timeout must still be able
      // to abandon the delivery, which aborts its request.
      Effect.interruptible,
      Effect.timeoutFail({
        duration: settings.deliveryTimeout,
        onTimeout: () =>
          new EventDeliveryFailed({ reason: `no answer within ${Duration.toMillis(settings.deliveryTimeout)} ms` })
      }),
      Effect.either,
      Effect.withSpan("event.deliver", {
        kind: "producer",
        captureStackTrace: false,
        attributes: { "event.target": target.label }
      })
    )

  const settle = (event: OutboxEvent, settlement: DeliverySettlement) =>
    Effect.map(
      outbox.settleDelivery(event.id, dispatcherId, settlement),
      Option.getOrElse((): EventRoundOutcome => "claim_lost")
    )

  /** One delivery round of one claimed event, settled. Uninterruptible: a shutdown lets it finish. */
  const deliverEvent = (event: OutboxEvent): Effect.Effect<EventRoundOutcome> =>
    Effect.gen(function*() {
      const body = yield* Effect.either(decodeBody(event.payload))
      if (Either.isLeft(body)) {
        // It can never be delivered: dead at once, for an operator to look at.
        yield* Effect.logError("Terminal event payload does not decode; event marked dead")
        return yield* settle(event, {
          _tag: "GiveUp",
          deliveredTo: event.deliveredTo,
          error: "payload does not decode as a job event"
        })
      }
      const due = targets.filter((target) => !event.deliveredTo.includes(target.key))
      const results = yield* Effect.forEach(due, (target) => deliverTo(target, event, body.right), {
        concurrency: "unbounded"
      })
      const deliveredTo = [
        ...event.deliveredTo,
        ...due.filter((_, index) => Either.isRight(results[index]!)).map((target) => target.key)
      ]
      const refusals = due.flatMap((target, index) => {
        const result = results[index]!
        return Either.isLeft(result) ? [{ target, error: result.left }] : []
      })
      if (refusals.length === 0) return yield* settle(event, { _tag: "Delivered", deliveredTo })
      const error = refusals.map(({ error, target }) => `${target.label}: ${error.reason}`).join("; ")
      const attempt = event.attemptCount + 1
      const delay = yield* eventRetryDelay(settings, attempt)
      // A target that asked for a pause gets it, up to the longest delay of the schedule.
      const asked = Duration.min(
        settings.retryMaxDelay,
        Duration.millis(Math.max(0, ...refusals.map(({ error }) => error.retryAfterMs ?? 0)))
      )
      const outcome = yield* settle(
        event,
        Option.match(delay, {
          onNone: (): DeliverySettlement => ({ _tag: "GiveUp", deliveredTo, error }),
          onSome: (retryDelay): DeliverySettlement => ({
            _tag: "RetryLater",
            deliveredTo,
            error,
            retryDelay: Duration.max(retryDelay, asked)
          })
        })
      )
      yield* Effect.logWarning(
        outcome === "dead"
          ? "Terminal event not delivered; retry time spent, event dead"
          : "Terminal event not delivered; retry scheduled"
      ).pipe(
        Effect.annotateLogs({ outcome, attempt, error })
      )
      return outcome
    }).pipe(
      // A storage error leaves the event `processing`: its claim expires and it is delivered again.
      Effect.catchAllCause((cause) =>
        Effect.logError("Delivering a terminal event failed; its claim will expire", cause).pipe(
          Effect.as<EventRoundOutcome>("claim_lost")
        )
      ),
      Effect.annotateLogs({
        dispatcherId,
        eventId: event.id,
        eventType: event.eventType,
        aggregateId: event.aggregateId
      }),
      // In the job's one trace, beside its run.
      Effect.withSpan("dispatcher.notify", {
        kind: "producer",
        captureStackTrace: false,
        ...storedPlacement(event.traceParent),
        attributes: {
          "ai_job.id": event.aggregateId,
          "outbox.event_id": event.id,
          "outbox.event_type": event.eventType,
          dispatcherId
        }
      }),
      Effect.withTracerEnabled(true),
      Effect.uninterruptible
    )

  /** With no target configured an event has nowhere to go: a batch of them is settled in one write. */
  const settleUntargeted = Effect.gen(function*() {
    const claimed = yield* outbox.claimBatch(dispatcherId, batchSize, "notify")
    yield* outbox.markPublishedMany(claimed.map((event) => event.id), dispatcherId)
    return claimed.length >= batchSize ? "more" as const : "idle" as const
  }).pipe(Effect.uninterruptible)

  /** The lane's loop: claims as many events as it has free slots, and waits when it has none or finds none. */
  const run = Effect.gen(function*() {
    const inFlight = yield* Ref.make(0)
    const freed = yield* Queue.sliding<void>(1)
    const deliveries = yield* FiberSet.make()
    const claimRound = targets.length === 0
      ? settleUntargeted
      : Effect.gen(function*() {
        const free = settings.concurrency - (yield* Ref.get(inFlight))
        if (free <= 0) return "busy" as const
        const claimed = yield* outbox.claimBatch(dispatcherId, free, "notify")
        yield* Ref.update(inFlight, (count) => count + claimed.length)
        for (const event of claimed) {
          yield* FiberSet.run(
            deliveries,
            Effect.ensuring(
              deliverEvent(event),
              Effect.zipRight(Ref.update(inFlight, (count) => count - 1), Queue.offer(freed, undefined))
            )
          )
        }
        return claimed.length >= free ? "busy" as const : "idle" as const
      }).pipe(Effect.uninterruptible)
    const loop = claimRound.pipe(
      Effect.catchAll((error) =>
        Effect.logWarning("Claiming terminal events failed").pipe(
          Effect.annotateLogs({ dispatcherId, error: error.message }),
          Effect.as("idle" as const)
        )
      ),
      Effect.flatMap((round) =>
        round === "more"
          ? Effect.void
          : round === "busy"
          // Every slot taken: the next claim waits for one to free up.
          ? Effect.race(Queue.take(freed), Effect.sleep(timing.outboxPollInterval))
          : Effect.sleep(timing.outboxPollInterval)
      ),
      Effect.forever
    )
    yield* Effect.logInfo("Terminal event delivery started").pipe(
      Effect.annotateLogs({
        dispatcherId,
        targets: targets.map((target) => target.label).join(", "),
        concurrency: settings.concurrency
      })
    )
    yield* Effect.forkScoped(Effect.withTracerEnabled(loop, false))
  })

  return { deliverEvent, run }
})

export type EventDispatcher = Effect.Effect.Success<typeof makeEventDispatcher>
