import { Context, DateTime, type Effect, type Queue, type Scope } from "effect"
import type { AiJob } from "../domain/AiJob.js"
import { type JobEvent, stageOf } from "../domain/JobEvent.js"

/**
 * Job events across processes (docs/architecture.md §8.7): a job's lifecycle and progress
 * changes, published after the commit that made them true. Delivery is at most once (Redis
 * pub/sub); a reader that must not miss a state reads the row too.
 */
export class JobEvents extends Context.Tag("ai-job-engine/JobEvents")<
  JobEvents,
  {
    /** Never fails and never waits for subscribers; a lost event is logged. */
    readonly publish: (event: JobEvent) => Effect.Effect<void>
    /**
     * The events of one job published after this effect completes (the subscription is live by
     * then, so a read that follows cannot miss a change), until the scope closes. A queue, not a
     * stream: a reader waits on it with a timeout (interruption loses nothing) for a few KiB.
     */
    readonly subscribe: (jobId: string) => Effect.Effect<Queue.Dequeue<JobEvent>, never, Scope.Scope>
  }
>() {}

/** The event a just-written row announces. */
export const jobEventOf = (job: AiJob): JobEvent => ({
  jobId: job.id,
  lifecycleStatus: job.lifecycleStatus,
  progress: job.progress,
  stage: stageOf(job),
  attempt: job.attemptCount,
  at: DateTime.unsafeFromDate(job.updatedAt),
  ...(job.errorCode === null ? {} : { errorCode: job.errorCode })
})
