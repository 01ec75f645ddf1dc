import { Context, type Effect, type Option } from "effect"
import type { AiJob } from "../domain/AiJob.js"
import type { PersistenceError } from "../domain/PersistenceError.js"
import type { ArtifactRef } from "./ResultProjectors.js"

export interface StoredArtifact extends ArtifactRef {
  readonly id: string
  readonly jobId: string
  readonly createdAt: Date
}

/** `ai_job_artifact`: what a job's projection produced (docs/architecture.md §11). */
export class ArtifactRepository extends Context.Tag("ai-job-engine/ArtifactRepository")<
  ArtifactRepository,
  {
    /**
     * Records artifacts inside the PROJECT transaction. The unique key (job, type, artifact id)
     * makes a repeated projection insert nothing: those count as `duplicates`.
     */
    readonly record: (
      jobId: string,
      artifacts: ReadonlyArray<ArtifactRef>
    ) => Effect.Effect<{ readonly inserted: number; readonly duplicates: number }, PersistenceError>
    /** In ordinal order. */
    readonly listByJob: (jobId: string) => Effect.Effect<ReadonlyArray<StoredArtifact>, PersistenceError>
    /**
     * The status read: a job and, when it succeeded, its artifacts in
     * ordinal order, in one round trip (none for a job in any other state).
     */
    readonly findJobWithArtifacts: (
      jobId: string
    ) => Effect.Effect<
      Option.Option<{ readonly job: AiJob; readonly artifacts: ReadonlyArray<StoredArtifact> }>,
      PersistenceError
    >
  }
>() {}
