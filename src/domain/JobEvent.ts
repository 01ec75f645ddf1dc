import { Schema } from "effect"
import { type AiJob } from "./AiJob.js"
import { LifecycleStatus } from "./LifecycleStatus.js"

/** Where a job is in the pipeline, as events and progress name it. */
export const JobStage = Schema.Literal("QUEUED", "PREPARE", "RESOLVE", "EXECUTE", "PROJECT", "COMPLETE")
export type JobStage = typeof JobStage.Type

/**
 * A job's lifecycle or progress changed (docs/architecture.md §8.7): published after the commit
 * that made it true. Only the job id and its state: never input, output or user data.
 */
export const JobEvent = Schema.Struct({
  jobId: Schema.String,
  lifecycleStatus: LifecycleStatus,
  progress: Schema.Number,
  stage: JobStage,
  attempt: Schema.Number,
  at: Schema.DateTimeUtc,
  errorCode: Schema.optional(Schema.String)
}).annotations({ identifier: "JobEvent" })
export type JobEvent = typeof JobEvent.Type

/** The wire form (JSON text) of an event on a pub/sub channel. */
export const JobEventJson = Schema.parseJson(JobEvent)

/** The stage a row shows: terminal is COMPLETE, queued is QUEUED, a running job's by its progress. */
export const stageOf = (job: Pick<AiJob, "lifecycleStatus" | "progress">): JobStage => {
  switch (job.lifecycleStatus) {
    case "queued":
      return "QUEUED"
    case "running":
      return job.progress >= progressAt.VALIDATED
        ? "PROJECT"
        : job.progress >= progressAt.EXECUTE
        ? "EXECUTE"
        : job.progress >= progressAt.RESOLVE
        ? "RESOLVE"
        : "PREPARE"
    default:
      return "COMPLETE"
  }
}

/** `progress` at the points a client sees: locked, resolved, call begun, output validated, committed. */
export const progressAt = {
  PREPARE: 5,
  RESOLVE: 15,
  EXECUTE: 20,
  VALIDATED: 80,
  PROJECTED: 100
} as const
