import { Context, type Effect } from "effect"
import type { JobDefinition } from "../domain/JobDefinition.js"

export interface BuiltSnapshot {
  readonly content: unknown
  readonly redactionVersion: string
  readonly expiresAt: Date
}

/** ADR 8.4: freezes a job's validated input, redacted, with an expiry. */
export class SnapshotBuilder extends Context.Tag("ai-job-engine/SnapshotBuilder")<
  SnapshotBuilder,
  {
    readonly build: (definition: JobDefinition, validatedInput: unknown) => Effect.Effect<BuiltSnapshot>
  }
>() {}
