import type { Effect } from "effect"
import type { JobTypeSpec } from "../domain/JobType.js"
import type { ProjectionStore } from "../services/ProjectionStore.js"
import type { PromptTemplate } from "../services/PromptTemplates.js"
import type { ResultProjector } from "../services/ResultProjectors.js"

/**
 * Everything one job type brings: its definition and Schemas, its versioned prompts and its
 * projector. Adding a job type is one folder under `src/jobs/` exporting one of these, and
 * one line in `catalog.ts`.
 */
export interface JobTypeModule {
  readonly spec: JobTypeSpec
  readonly prompts: ReadonlyArray<PromptTemplate>
  readonly projector: Effect.Effect<ResultProjector, never, ProjectionStore>
}
