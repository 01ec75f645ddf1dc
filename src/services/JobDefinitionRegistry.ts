import { Context, type Effect } from "effect"
import type { JobDefinition } from "../domain/JobDefinition.js"
import type { JobTypeSpec } from "../domain/JobType.js"
import type { JobDefinitionError, UnknownJobType } from "../domain/RegistryErrors.js"

/** A job type the registry accepted: its checked definition and its decoders. */
export interface RegisteredJobType extends Omit<JobTypeSpec, "definition"> {
  readonly definition: JobDefinition
}

/** ADR 2.2: job type → definition, instead of a switch over job types. */
export class JobDefinitionRegistry extends Context.Tag("ai-job-engine/JobDefinitionRegistry")<
  JobDefinitionRegistry,
  {
    /** Checks every rule of ADR 2.2 and fails with the first broken one's own error. */
    readonly register: (spec: JobTypeSpec) => Effect.Effect<RegisteredJobType, JobDefinitionError>
    readonly get: (jobType: string) => Effect.Effect<RegisteredJobType, UnknownJobType>
    readonly getAll: Effect.Effect<ReadonlyArray<RegisteredJobType>>
  }
>() {}
