import { Context, type Effect, Schema } from "effect"
import type { AiJob } from "../domain/AiJob.js"
import type { ValidationError } from "../domain/ExecutionError.js"
import type { PersistenceError } from "../domain/PersistenceError.js"

export interface ArtifactRef {
  readonly artifactType: string
  readonly artifactId: string
  readonly ordinal: number
}

/** What a projection wrote (or found already written, when `duplicate`). */
export interface ProjectionResult {
  readonly artifacts: ReadonlyArray<ArtifactRef>
  readonly duplicate: boolean
}

/**
 * Turns a validated output into business rows and artifacts (docs/architecture.md §11). `project`
 * runs inside the PROJECT stage's `UnitOfWork.transaction`, beside the fenced `markSucceeded`.
 */
export interface ResultProjector {
  readonly key: string
  readonly project: (
    job: AiJob,
    validatedOutput: unknown
  ) => Effect.Effect<ProjectionResult, PersistenceError | ValidationError>
  /** The business records a job's projection wrote, as the API shows them. */
  readonly records: (job: AiJob) => Effect.Effect<ReadonlyArray<Readonly<Record<string, unknown>>>, PersistenceError>
}

export class UnknownProjectorKey extends Schema.TaggedError<UnknownProjectorKey>()("UnknownProjectorKey", {
  key: Schema.String
}) {}

export class ResultProjectors extends Context.Tag("ai-job-engine/ResultProjectors")<
  ResultProjectors,
  {
    readonly keys: ReadonlyArray<string>
    readonly get: (key: string) => Effect.Effect<ResultProjector, UnknownProjectorKey>
  }
>() {}
