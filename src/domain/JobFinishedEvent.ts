import { Duration, Schema } from "effect"
import type { AiJob } from "./AiJob.js"
import { derivedId } from "./DerivedId.js"
import type { LifecycleStatus } from "./LifecycleStatus.js"
import { aiJobAggregateType, type NewOutboxEvent } from "./OutboxEvent.js"

/**
 * The events that announce a job's end (docs/architecture.md §6.8), one per terminal state. They
 * are written by the terminal write itself, in its transaction, and delivered as Standard
 * Webhooks and to the domain-events queue.
 */
export const JobFinishedEventType = Schema.Literal("ai.job.succeeded", "ai.job.failed", "ai.job.cancelled")
export type JobFinishedEventType = typeof JobFinishedEventType.Type

export const jobFinishedEventTypes: ReadonlyArray<JobFinishedEventType> = JobFinishedEventType.literals

export const finishedEventTypeOf: Readonly<Record<"succeeded" | "failed" | "cancelled", JobFinishedEventType>> = {
  succeeded: "ai.job.succeeded",
  failed: "ai.job.failed",
  cancelled: "ai.job.cancelled"
}

/** One artifact of a succeeded job: what a receiver fetches (`GET /api/ai/jobs/:jobId/artifacts`). */
export const FinishedArtifact = Schema.Struct({ artifactType: Schema.String, artifactId: Schema.String })
export type FinishedArtifact = typeof FinishedArtifact.Type

/**
 * The event as a receiver gets it: the Standard Webhooks envelope (`type`, `timestamp` of the
 * terminal write, `data`). Ids, the status, the error code and the artifacts' ids only: never the
 * input, the output, the user or a key.
 */
export const JobFinishedEvent = Schema.Struct({
  type: JobFinishedEventType,
  timestamp: Schema.String,
  data: Schema.Struct({
    jobId: Schema.String,
    jobType: Schema.String,
    lifecycleStatus: Schema.Literal("succeeded", "failed", "cancelled"),
    errorCode: Schema.optional(Schema.String),
    finishedAt: Schema.String,
    artifacts: Schema.Array(FinishedArtifact)
  })
}).annotations({ identifier: "JobFinishedEvent" })
export type JobFinishedEvent = typeof JobFinishedEvent.Type

/** One terminal event per job: the unique dedupe key keeps a second one out whatever writes it. */
export const finishedDedupeKey = (jobId: string) => `ai.job.finished:${jobId}`

/**
 * Derived from the job's id: one terminal event per job, so its id (a receiver's `webhook-id`, the
 * domain-events queue job id) needs no randomness.
 */
export const finishedEventId = (jobId: string) => derivedId("ai.job.finished", jobId)

const isFinished = (status: LifecycleStatus): status is "succeeded" | "failed" | "cancelled" =>
  status === "succeeded" || status === "failed" || status === "cancelled"

/**
 * The outbox row announcing `job`'s end, built from the row its terminal write left (a job that
 * is not terminal has none). `artifacts` in ordinal order, empty unless it succeeded.
 */
export const finishedEventFor = (
  job: AiJob,
  artifacts: ReadonlyArray<FinishedArtifact>
): NewOutboxEvent | undefined => {
  const status = job.lifecycleStatus
  if (!isFinished(status)) return undefined
  const finishedAt = (job.finishedAt ?? job.updatedAt).toISOString()
  const body: JobFinishedEvent = {
    type: finishedEventTypeOf[status],
    timestamp: finishedAt,
    data: {
      jobId: job.id,
      jobType: job.jobType,
      lifecycleStatus: status,
      ...(job.errorCode === null || status === "succeeded" ? {} : { errorCode: job.errorCode }),
      finishedAt,
      artifacts: status === "succeeded"
        ? artifacts.map(({ artifactId, artifactType }) => ({ artifactType, artifactId }))
        : []
    }
  }
  return {
    id: finishedEventId(job.id),
    eventType: body.type,
    aggregateType: aiJobAggregateType,
    aggregateId: job.id,
    dedupeKey: finishedDedupeKey(job.id),
    payload: body,
    delay: Duration.zero,
    lane: "notify"
  }
}
