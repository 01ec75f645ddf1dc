import { Clock, Duration, Effect } from "effect"
import { TimingConfig } from "../config/EngineConfig.js"
import type { JobDefinition } from "../domain/JobDefinition.js"

export interface BuiltSnapshot {
  readonly content: unknown
  readonly redactionVersion: string
  readonly expiresAt: Date
}

/** Field names whose values never belong in a snapshot, at any depth. */
const secretFieldPattern = /(api[_-]?key|password|passwd|secret|token|authorization|credential)/i

export const redactionVersion = "v1-secret-fields"

const redact = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(redact)
  if (value !== null && typeof value === "object") {
    const kept: Record<string, unknown> = {}
    for (const [key, field] of Object.entries(value)) {
      kept[key] = secretFieldPattern.test(key) ? "[redacted]" : redact(field)
    }
    return kept
  }
  return value
}

/** Freezes a job's validated input, redacted, with an expiry. Needs `TimingConfig` (the retention). */
export class SnapshotBuilder extends Effect.Service<SnapshotBuilder>()("ai-job-engine/SnapshotBuilder", {
  effect: Effect.gen(function*() {
    const timing = yield* TimingConfig
    return {
      build: (_definition: JobDefinition, validatedInput: unknown): Effect.Effect<BuiltSnapshot> =>
        Effect.map(Clock.currentTimeMillis, (millis) => ({
          content: redact(validatedInput),
          redactionVersion,
          expiresAt: new Date(millis + Duration.toMillis(timing.snapshotRetention))
        }))
    }
  })
}) {}
