import { Schema } from "effect"
import { LifecycleStatus } from "../domain/LifecycleStatus.js"
import { OutboxStatus } from "../domain/OutboxEvent.js"
import { QueueName } from "../domain/QueueName.js"
import { withValueFreeErrors } from "../domain/ValueFreeMessages.js"
import { AdminJobStatusResponse, pageOf, pageParams } from "./ApiSchemas.js"

/** The operator's views beyond single jobs: outbox, timeline, statistics. */

/** `claimed` is what the store calls `processing`: held by a dispatcher right now. */
export const OutboxListStatus = Schema.Literal("dead", "pending", "claimed")
export type OutboxListStatus = typeof OutboxListStatus.Type

export const OutboxEventListParams = withValueFreeErrors(Schema.Struct({
  status: Schema.optionalWith(OutboxListStatus, { default: () => "dead" as const }),
  ...pageParams
}))

export const OutboxEventDetail = Schema.Struct({
  eventId: Schema.String,
  eventType: Schema.String,
  aggregateType: Schema.String,
  aggregateId: Schema.String,
  status: OutboxStatus,
  attemptCount: Schema.Number,
  availableAt: Schema.String,
  createdAt: Schema.String,
  updatedAt: Schema.String,
  lockedBy: Schema.optional(Schema.String),
  lastError: Schema.optional(Schema.String)
}).annotations({ identifier: "OutboxEventDetail" })

export const OutboxEventPage = pageOf(OutboxEventDetail, "OutboxEventPage")

export const ReplayAllDeadResponse = Schema.Struct({
  /** How many dead events went back to pending. */
  replayed: Schema.Number
}).annotations({ identifier: "ReplayAllDead" })

const ProviderCall = Schema.Struct({
  callNo: Schema.Number,
  at: Schema.String,
  provider: Schema.String,
  model: Schema.String,
  latencyMs: Schema.Number,
  promptTokens: Schema.Number,
  completionTokens: Schema.Number,
  totalTokens: Schema.Number,
  /** The answer reported no usage: the tokens and cost are the engine's estimate. */
  tokensEstimated: Schema.Boolean,
  costMicros: Schema.Number,
  /** `OK`, or the call's error code. */
  outcome: Schema.String
}).annotations({ identifier: "ProviderCall" })

const TimelineAttempt = Schema.Struct({
  /** The job lease the calls were made in; a takeover starts a new one. */
  leaseNo: Schema.Number,
  calls: Schema.Array(ProviderCall)
}).annotations({ identifier: "TimelineAttempt" })

export const TimelineEventKind = Schema.Literal(
  "created",
  "started",
  "cancel_requested",
  /** An operator retried the job: the detail names the job the retry created. */
  "retry_requested",
  "succeeded",
  "failed",
  "cancelled",
  "last_update"
)
export type TimelineEventKind = typeof TimelineEventKind.Type

const TimelineEvent = Schema.Struct({
  at: Schema.String,
  kind: TimelineEventKind,
  detail: Schema.optional(Schema.String)
}).annotations({ identifier: "TimelineEvent" })

export const JobTimelineResponse = Schema.Struct({
  job: AdminJobStatusResponse,
  attempts: Schema.Array(TimelineAttempt),
  /** The recorded times of the job's lifecycle, oldest first. */
  events: Schema.Array(TimelineEvent),
  /** The job an operator's retry created this one from. */
  retriedFrom: Schema.optional(Schema.String),
  /** Jobs an operator's retry created from this one. */
  retriedAs: Schema.Array(Schema.String)
}).annotations({ identifier: "JobTimeline" })

const TypeStatusCount = Schema.Struct({
  jobType: Schema.String,
  lifecycleStatus: LifecycleStatus,
  total: Schema.Number
})
const QueueDepth = Schema.Struct({
  queueName: QueueName,
  available: Schema.Boolean,
  waiting: Schema.Number,
  active: Schema.Number,
  delayed: Schema.Number
})
const MinuteThroughput = Schema.Struct({ minute: Schema.String, jobType: Schema.String, finished: Schema.Number })
const DurationByType = Schema.Struct({
  jobType: Schema.String,
  finished: Schema.Number,
  p50Ms: Schema.NullOr(Schema.Number),
  p95Ms: Schema.NullOr(Schema.Number)
})
const UsageDay = Schema.Struct({
  day: Schema.String,
  calls: Schema.Number,
  totalTokens: Schema.Number,
  costMicros: Schema.Number
})

const ProviderHealth = Schema.Struct({
  provider: Schema.String,
  model: Schema.String,
  /** `open`: calls skip it for the route's next target; `half_open`: one call is probing it. */
  breaker: Schema.Literal("closed", "open", "half_open"),
  /** Provider-side failures in a row that the breaker counts. */
  failures: Schema.Number,
  /** When an open breaker lets a probe through; null unless open. */
  openUntil: Schema.NullOr(Schema.String)
}).annotations({ identifier: "ProviderHealth" })

export const StatsResponse = Schema.Struct({
  generatedAt: Schema.String,
  jobs: Schema.Array(TypeStatusCount),
  queues: Schema.Array(QueueDepth),
  outbox: Schema.Struct({
    pending: Schema.Number,
    dead: Schema.Number,
    oldestPendingAgeMs: Schema.NullOr(Schema.Number)
  }),
  /** Jobs finished per minute and type over the last hour (minutes without any left out). */
  perMinute: Schema.Array(MinuteThroughput),
  /** Start to finish, over the last hour. */
  durations: Schema.Array(DurationByType),
  usageByDay: Schema.Array(UsageDay),
  /** Every provider and model a route names, with its circuit breaker as every process sees it. */
  providers: Schema.Array(ProviderHealth)
}).annotations({ identifier: "Stats" })
