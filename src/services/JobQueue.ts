import { Cause, Context, type Duration, type Effect, Option, ParseResult, Schema, type Scope } from "effect"
import { priorityBounds } from "../domain/JobDefinition.js"
import type { QueueName } from "../domain/QueueName.js"

/**
 * The frozen queue payload: ids only, so no input, user, credential or snapshot content reaches
 * Redis. The spec's `idempotencyKey` (the outbox key `{jobType}:{userId}:{idempotencyKey}`) would
 * carry the user id and a user-chosen string there; `dedupeKey` is instead the queue job id derived
 * from the AiJob id, which is what the queue deduplicates on. `createdAt` is the commit time.
 */
export const AiJobQueuePayload = Schema.Struct({
  jobId: Schema.NonEmptyTrimmedString,
  jobType: Schema.NonEmptyTrimmedString,
  dedupeKey: Schema.NonEmptyTrimmedString,
  createdAt: Schema.Date,
  /** The job's stored `traceparent`: a worker joins the job's trace without reading the row. */
  traceParent: Schema.optional(Schema.NullOr(Schema.String))
})
export type AiJobQueuePayload = typeof AiJobQueuePayload.Type
export type AiJobQueuePayloadEncoded = typeof AiJobQueuePayload.Encoded

/**
 * Derived from the AiJob id, so two users' equal idempotency keys never collide. BullMQ rejects
 * custom ids with ':' (unless in exactly three parts) and reserves integers for its counter: '%'
 * and ':' are escaped (one-to-one) and the `aijob-` prefix keeps it from being an integer.
 */
export const queueJobIdFor = (jobId: string): string => `aijob-${jobId.replace(/%/g, "%25").replace(/:/g, "%3A")}`

/**
 * The spec's priority runs 0 (highest) .. 100; BullMQ's 1 (highest) .. 2^21, with 0 meaning "no
 * priority": shifted by one, so every job is prioritized and the order kept.
 */
export const queuePriorityFor = (priority: number): number => {
  const finite = Number.isFinite(priority) ? Math.round(priority) : priorityBounds.max
  return Math.min(priorityBounds.max, Math.max(priorityBounds.min, finite)) + 1
}

/**
 * The payload for a job row, built the same way by every producer. Not validated here: every
 * payload is encoded (and so checked) on its way to the queue, and a create should not pay twice.
 */
export const payloadFor = (job: {
  readonly jobId: string
  readonly jobType: string
  readonly createdAt: Date
  /** A reaper's redispatch: a queue job of its own, since the lost worker's may still be active. */
  readonly redispatchOf?: string | undefined
  readonly traceParent?: string | null | undefined
}) =>
  AiJobQueuePayload.make({
    jobId: job.jobId,
    jobType: job.jobType,
    dedupeKey: job.redispatchOf === undefined
      ? queueJobIdFor(job.jobId)
      : `${queueJobIdFor(job.jobId)}-r${job.redispatchOf}`,
    createdAt: job.createdAt,
    ...(job.traceParent === undefined ? {} : { traceParent: job.traceParent })
  }, true)

/** A request to put one job on a queue. The queue job id is the payload's `dedupeKey` (see `payloadFor`). */
export interface JobQueueAddRequest {
  readonly queueName: QueueName
  readonly payload: AiJobQueuePayload
  /** The spec's scale: 0 = highest, 100 = lowest. */
  readonly priority: number
  readonly delay?: Duration.Duration
  /**
   * How long to wait for the queue at most (default `QUEUE_ADD_TIMEOUT_MS`); past it the add
   * fails with `outcomeUnknown`. A create waits less than a dispatcher.
   */
  readonly timeout?: Duration.Duration
}

/**
 * `added`: a new queue job exists. `duplicate`: a job with the same id was already waiting,
 * delayed or active, and nothing changed. Once a job is finished it is removed, so the same
 * AiJob can be queued again (the database's compare-and-set is the real dedupe).
 */
export type JobQueueAddOutcome = "added" | "duplicate"

/**
 * The queue (Redis) could not be reached, or refused the command. `outcomeUnknown`: the
 * command may have been sent and may still run (a timeout abandons it without cancelling it;
 * a connection lost mid-command may have run it): ask `contains` before treating it as not done.
 */
export class JobQueueUnavailable extends Schema.TaggedError<JobQueueUnavailable>()("JobQueueUnavailable", {
  operation: Schema.String,
  message: Schema.String,
  outcomeUnknown: Schema.optional(Schema.Boolean)
}) {}

/**
 * A handler gives its delivery back unfinished, its lock (if any) released. `consumerStopping`: the
 * job goes straight back for another consumer, costing no attempt or backoff; otherwise (a worker
 * that could not reach its database) it is a failed delivery: one attempt, then the backoff.
 */
export class JobHandedOff extends Schema.TaggedError<JobHandedOff>()("JobHandedOff", {
  jobId: Schema.String,
  reason: Schema.String,
  consumerStopping: Schema.Boolean
}) {}

export const isStoppingHandOff = (cause: Cause.Cause<unknown>): boolean =>
  Option.exists(Cause.failureOption(cause), (error) => error instanceof JobHandedOff && error.consumerStopping)

export interface JobDelivery {
  readonly queueName: QueueName
  readonly queueJobId: string
  readonly payload: AiJobQueuePayload
  /** 1 for the first delivery; grows when a delivery failed or its worker died. */
  readonly attempt: number
  /** The queue's attempt budget: only a crashed worker should ever use it up. */
  readonly maxAttempts: number
  /** Aborted when the queue takes the job back (worker shutdown, lost lock, cancel). */
  readonly signal: AbortSignal
}

export interface ConsumeOptions {
  /** Jobs handled at once by this process; defaults to the queue's configured concurrency. */
  readonly concurrency?: number
}

/** Jobs per state. `waiting` includes prioritized jobs; finished jobs are removed, not counted. */
export interface QueueCounts {
  readonly waiting: number
  readonly active: number
  readonly delayed: number
}

/**
 * A queue job's state: `Waiting` to be delivered (waiting, prioritized or delayed), `Active` with
 * a consumer since `activeSinceMs` (epoch milliseconds), or `Gone`.
 */
export type QueueJobState =
  | { readonly _tag: "Waiting" }
  | { readonly _tag: "Active"; readonly activeSinceMs: number }
  | { readonly _tag: "Gone" }

/** A payload that does not decode: the job is dropped (and logged), never retried. */
export const decodeQueuePayload = Schema.decodeUnknown(AiJobQueuePayload, { onExcessProperty: "ignore" })
/** `decodeQueuePayload` without an effect, for a consumer outside any fiber (one per delivery). */
export const decodeQueuePayloadEither = Schema.decodeUnknownEither(AiJobQueuePayload, { onExcessProperty: "ignore" })
export const encodeQueuePayload = Schema.encodeSync(AiJobQueuePayload)
/**
 * Where a payload failed to decode, as field paths only (`jobId`, `createdAt`): the parse
 * error's messages quote the offending values, and logs must not carry what a payload held.
 */
export const payloadErrorPaths = (error: ParseResult.ParseError): string => {
  const paths = ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) =>
    issue.path.length === 0 ? "(root)" : issue.path.map(String).join(".")
  )
  return [...new Set(paths)].join(",")
}

/**
 * The job queues (docs/architecture.md §7) between the outbox dispatcher and the workers. BullMQ on Redis in
 * production, an in-memory twin for tests and the embedded engine; both pass one contract suite.
 */
export class JobQueue extends Context.Tag("ai-job-engine/JobQueue")<
  JobQueue,
  {
    /** Idempotent by the queue job id while the job is waiting, delayed or active. */
    readonly add: (request: JobQueueAddRequest) => Effect.Effect<JobQueueAddOutcome, JobQueueUnavailable>
    /**
     * Many jobs in one round trip (BullMQ's `addBulk`), each as `add` would queue it: an id
     * already waiting, delayed or active is left as it is. Waits for the queue at most
     * `timeout` (default `QUEUE_ADD_TIMEOUT_MS`); a failure may have queued some of them
     * (`outcomeUnknown`), which only an add again (a no-op for those) settles.
     */
    readonly addBulk: (
      requests: ReadonlyArray<JobQueueAddRequest>,
      options?: { readonly timeout?: Duration.Duration }
    ) => Effect.Effect<void, JobQueueUnavailable>
    /**
     * A consumer for `queueName`, alive for the caller's scope. A payload that does not decode is
     * logged and dropped (the row stays for the reaper). A failed delivery is retried with the
     * queue's backoff until its attempts are spent; one handed back by a stopping consumer waits
     * again at once, its attempt not counted. Handlers catch their own errors: queue attempts only
     * cover a crashed worker. Closing the scope waits for active deliveries, aborting their signal
     * after the configured grace.
     */
    readonly consume: <E, R>(
      queueName: QueueName,
      handler: (delivery: JobDelivery) => Effect.Effect<void, E, R>,
      options?: ConsumeOptions
    ) => Effect.Effect<void, JobQueueUnavailable, Scope.Scope | R>
    readonly counts: (queueName: QueueName) => Effect.Effect<QueueCounts, JobQueueUnavailable>
    /**
     * Whether a queue job with this id is on the queue now (waiting, delayed or active;
     * finished jobs are removed). Settles an add whose outcome is unknown: on one connection a
     * later command runs after the abandoned add, so its answer includes that add.
     */
    readonly contains: (queueName: QueueName, queueJobId: string) => Effect.Effect<boolean, JobQueueUnavailable>
    /** Where one queue job stands (`Gone` once it finished, or for an id the queue never held). */
    readonly state: (queueName: QueueName, queueJobId: string) => Effect.Effect<QueueJobState, JobQueueUnavailable>
  }
>() {}
