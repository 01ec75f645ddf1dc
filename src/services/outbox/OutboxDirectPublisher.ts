import { Effect, Option, Queue } from "effect"
import { DirectDispatchSettings } from "../../config/DirectDispatchSettings.js"
import type { QueueName } from "../../domain/QueueName.js"
import { storedParent } from "../../domain/TraceContext.js"
import { JobQueue, payloadFor } from "../JobQueue.js"
import { OutboxRepository } from "./OutboxRepository.js"

/** What the creator knows of a job it just committed, enough to queue it as a dispatcher would. */
export interface CommittedEnqueue {
  readonly eventId: string
  readonly jobId: string
  readonly jobType: string
  readonly queueName: QueueName
  readonly priority: number
  readonly createdAt: Date
  /** The trace context stored with the job: the add is a span of the job's one trace. */
  readonly traceParent: string | null
}

/**
 * The outbox hop without a poll (docs/architecture.md §6.7): after its commit the creator adds the
 * job itself and marks the event published, many marks to one UPDATE. The event carries a grace
 * delay, so a dispatcher sweeps it only when the add or mark never happened: nothing is lost, and
 * at worst the job is queued twice under one id.
 */
export class OutboxDirectPublisher
  extends Effect.Service<OutboxDirectPublisher>()("ai-job-engine/OutboxDirectPublisher", {
    scoped: Effect.gen(function*() {
      const jobQueue = yield* JobQueue
      const outbox = yield* OutboxRepository
      const settings = yield* DirectDispatchSettings
      const added = yield* Queue.unbounded<string>()

      const markPublished = (eventIds: ReadonlyArray<string>) =>
        outbox.markPublishedDirect(eventIds).pipe(
          // Unmarked events are swept after the grace and added again: a no-op on the queue.
          Effect.catchAll((error) =>
            Effect.logWarning("marking directly queued events published failed; a dispatcher sweeps them").pipe(
              Effect.annotateLogs({ operation: error.operation, events: eventIds.length })
            )
          )
        )

      /** Waits for a first mark, lets more gather for `flushDelay`, and writes them in one statement. */
      const flush = Effect.gen(function*() {
        const first = yield* Queue.takeBetween(added, 1, settings.batchSize)
        yield* Effect.sleep(settings.flushDelay)
        const rest = yield* Queue.takeUpTo(added, settings.batchSize - first.length)
        yield* markPublished([...first, ...rest])
      })
      yield* Effect.forkScoped(Effect.forever(flush))
      // Marks still waiting when the process stops are written once more on the way out.
      yield* Effect.addFinalizer(() => Effect.flatMap(Queue.takeAll(added), (left) => markPublished([...left])))

      const addRequest = (event: CommittedEnqueue) => ({
        queueName: event.queueName,
        payload: payloadFor({
          jobId: event.jobId,
          jobType: event.jobType,
          createdAt: event.createdAt,
          traceParent: event.traceParent
        }),
        priority: event.priority,
        timeout: settings.addTimeout
      })

      // The dispatcher's `dispatcher.publish`, done by the creator: a child of the job's stored context.
      const publishSpan = (event: CommittedEnqueue, attributes: Record<string, unknown>) =>
        Effect.withSpan("outbox.publish", {
          kind: "producer",
          captureStackTrace: false,
          ...Option.match(storedParent(event.traceParent), { onNone: () => ({}), onSome: (parent) => ({ parent }) }),
          attributes: { ...attributes, "messaging.system": "bullmq" }
        })

      /** The events are marked published only once their add succeeded; a failed add is left to the sweep. */
      const markedWhenAdded =
        (events: ReadonlyArray<CommittedEnqueue>) =>
        <E extends { readonly message: string }>(adding: Effect.Effect<unknown, E>) =>
          adding.pipe(
            Effect.zipRight(Queue.offerAll(added, events.map((event) => event.eventId))),
            Effect.catchAll((error) =>
              Effect.logWarning("queueing new jobs directly failed; a dispatcher sweeps their events after the grace")
                .pipe(
                  Effect.annotateLogs({ jobId: events[0]?.jobId, jobs: events.length, error: error.message })
                )
            ),
            Effect.asVoid
          )

      /**
       * Queues a committed job now, waiting for Redis at most `addTimeout` (the create answers
       * after it); a failed or abandoned add is left to the dispatcher's sweep.
       */
      const publish = (event: CommittedEnqueue) =>
        jobQueue.add(addRequest(event)).pipe(
          markedWhenAdded([event]),
          publishSpan(event, { "ai_job.id": event.jobId, "outbox.event_id": event.eventId })
        )

      /** A batch's jobs in one bulk add (one round trip), marked published together when it succeeded. */
      const publishMany = (events: ReadonlyArray<CommittedEnqueue>) => {
        const [first] = events
        if (first === undefined) return Effect.void
        if (events.length === 1) return publish(first)
        return jobQueue.addBulk(events.map(addRequest), { timeout: settings.addTimeout }).pipe(
          markedWhenAdded(events),
          // A batch's jobs share the create's trace context.
          publishSpan(first, { "ai_job.id": first.jobId, "outbox.events": events.length })
        )
      }

      return { grace: settings.grace, publish, publishMany }
    })
  })
{}
