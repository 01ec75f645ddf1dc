import { Clock, Effect, Layer } from "effect"
import type { JobDefinition } from "../domain/JobDefinition.js"
import { SnapshotBuilder } from "./SnapshotBuilder.js"
import { TimingConfig } from "../config/EngineConfig.js"

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

export const SnapshotBuilderLive = Layer.effect(
  SnapshotBuilder,
  Effect.gen(function* () {
    const timing = yield* TimingConfig
    return SnapshotBuilder.of({
      build: (_definition: JobDefinition, validatedInput: unknown) =>
        Effect.map(Clock.currentTimeMillis, (millis) => ({
          content: redact(validatedInput),
          redactionVersion,
          expiresAt: new Date(millis + timing.snapshotRetentionMs)
        }))
    })
  })
)
