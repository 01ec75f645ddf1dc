import { Duration, Schema } from "effect"
import { QueueName } from "./QueueName.js"

/** `dead` is the end for an event that failed too often; an operator can replay it. */
export const OutboxStatus = Schema.Literal("pending", "processing", "published", "failed", "dead")
export type OutboxStatus = typeof OutboxStatus.Type

export const allOutboxStatuses: ReadonlyArray<OutboxStatus> = OutboxStatus.literals

/**
 * Which dispatch lane claims an event (docs/architecture.md §6.8): `enqueue` events put jobs on
 * their queues; `notify` events announce a job's end to webhooks and the domain-events queue.
 * Each lane claims only its own, so a slow endpoint never holds up a job's enqueue.
 */
export const OutboxLane = Schema.Literal("enqueue", "notify")
export type OutboxLane = typeof OutboxLane.Type

export const allOutboxLanes: ReadonlyArray<OutboxLane> = OutboxLane.literals

/** The event type that queues a job, and the aggregate of every event. */
export const enqueueEventType = "ai.job.enqueue"
export const aiJobAggregateType = "AiJob"

/** The only fields an enqueue event carries; never input, user or credential. */
export const EnqueuePayload = Schema.Struct({
  jobId: Schema.String,
  jobType: Schema.String,
  queueName: QueueName,
  priority: Schema.Number,
  /**
   * Set by the reaper for a job whose worker was lost: which redispatch this is (the lost
   * attempt and the reaper's window). Its queue job then has an id of its own, since the lost
   * worker's may still be held as active.
   */
  redispatchOf: Schema.optional(Schema.String.pipe(Schema.pattern(/^[0-9a-z-]{1,40}$/)))
})
export type EnqueuePayload = typeof EnqueuePayload.Type

export class OutboxEvent extends Schema.Class<OutboxEvent>("OutboxEvent")({
  id: Schema.String,
  eventType: Schema.String,
  aggregateType: Schema.String,
  aggregateId: Schema.String,
  dedupeKey: Schema.String,
  payload: Schema.Unknown,
  status: OutboxStatus,
  attemptCount: Schema.Number,
  availableAt: Schema.DateFromSelf,
  lockedBy: Schema.NullOr(Schema.String),
  lockedAt: Schema.NullOr(Schema.DateFromSelf),
  publishedAt: Schema.NullOr(Schema.DateFromSelf),
  lastError: Schema.NullOr(Schema.String),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf,
  lane: Schema.optionalWith(OutboxLane, { default: () => "enqueue" as const }),
  /**
   * The delivery targets (`EventTarget.key`) that acknowledged a `notify` event so far: a retry or
   * a replay goes to the others only. Empty for `enqueue` events.
   */
  deliveredTo: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  /**
   * Not a column of `outbox_event`: a claim reads it from the event's job (`ai_job.trace_parent`)
   * so the dispatcher's publish span joins the job's trace; null elsewhere.
   */
  traceParent: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null })
}) {}

export interface NewOutboxEvent {
  readonly id: string
  readonly eventType: string
  readonly aggregateType: string
  readonly aggregateId: string
  readonly dedupeKey: string
  readonly payload: unknown
  readonly delay: Duration.Duration
  /** `enqueue` when not given. */
  readonly lane?: OutboxLane
}

export type OutboxCounts = Readonly<Record<OutboxStatus, number>>

/**
 * One lane's backlog, for its gauges: events not yet published (`pending` or `processing`), events
 * `dead`, and the age of the oldest unpublished one by the store's clock (0 when there is none).
 */
export interface OutboxBacklog {
  readonly unpublished: number
  readonly dead: number
  readonly oldestUnpublishedAgeMs: number
}

/**
 * The only shape in which a job reaches the queue, whether first created, requeued or
 * redispatched; `dedupeKey` says which.
 */
export const enqueueEventFor = (
  job: { readonly id: string; readonly jobType: string; readonly queueName: QueueName; readonly priority: number },
  options: { readonly eventId: string; readonly dedupeKey: string; readonly redispatchOf?: string }
): NewOutboxEvent => {
  const payload: EnqueuePayload = {
    jobId: job.id,
    jobType: job.jobType,
    queueName: job.queueName,
    priority: job.priority,
    ...(options.redispatchOf === undefined ? {} : { redispatchOf: options.redispatchOf })
  }
  return {
    id: options.eventId,
    eventType: enqueueEventType,
    aggregateType: aiJobAggregateType,
    aggregateId: job.id,
    dedupeKey: options.dedupeKey,
    payload,
    delay: Duration.zero
  }
}
