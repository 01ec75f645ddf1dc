import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import { defineJobType } from "../../src/domain/JobType.js"
import { syntheticEchoDefinition } from "../../src/jobs/synthetic_echo/definition.js"
import { makeJobDefinitionRegistry } from "../../src/services/JobDefinitionRegistry.js"
import { projectorKeysOnly } from "../support/projectorKeys.js"

type Change = (definition: unknown) => unknown

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** A copy of `target` with the field at `path` replaced by `value`. */
const setPath = (target: unknown, path: ReadonlyArray<string>, value: unknown): unknown => {
  const [head, ...rest] = path
  if (head === undefined) return value
  const record = isRecord(target) ? target : {}
  return { ...record, [head]: setPath(record[head], rest, value) }
}

const withField = (path: ReadonlyArray<string>, value: unknown): Change => (definition) =>
  setPath(definition, path, value)

const specWith = (change: Change) =>
  defineJobType({
    definition: change(syntheticEchoDefinition),
    input: Schema.Struct({ message: Schema.String }),
    output: Schema.Struct({ echo: Schema.String })
  })

const registerError = (change: Change) =>
  Effect.gen(function*() {
    const registry = yield* makeJobDefinitionRegistry
    const result = yield* Effect.either(registry.register(specWith(change)))
    return Either.isLeft(result) ? result.left._tag : "registered"
  }).pipe(Effect.provide(projectorKeysOnly(["synthetic_echo"])))

describe("JobDefinitionRegistry", () => {
  it.effect("registers, gets and lists a valid definition", () =>
    Effect.gen(function*() {
      const registry = yield* makeJobDefinitionRegistry
      yield* registry.register(specWith((d) => d))
      const found = yield* registry.get("synthetic_echo")
      expect(found.definition.queue.queueName).toBe("ai-interactive")
      expect((yield* registry.getAll).map((entry) => entry.definition.jobType)).toStrictEqual(["synthetic_echo"])
      const unknown = yield* Effect.either(registry.get("nope"))
      expect(Either.isLeft(unknown) && unknown.left._tag).toBe("UnknownJobType")
    }).pipe(Effect.provide(projectorKeysOnly(["synthetic_echo"]))))

  it.effect("refuses a duplicate job type", () =>
    Effect.gen(function*() {
      const registry = yield* makeJobDefinitionRegistry
      yield* registry.register(specWith((d) => d))
      const again = yield* Effect.either(registry.register(specWith((d) => d)))
      expect(Either.isLeft(again) && again.left._tag).toBe("DuplicateJobDefinition")
    }).pipe(Effect.provide(projectorKeysOnly(["synthetic_echo"]))))

  const cases: ReadonlyArray<readonly [string, Change, string]> = [
    [
      "a job type with a hyphen (the spec's own active-recall)",
      withField(["jobType"], "active-recall"),
      "InvalidJobType"
    ],
    ["a job type starting with a digit", withField(["jobType"], "1quiz"), "InvalidJobType"],
    ["a one-letter job type", withField(["jobType"], "q"), "InvalidJobType"],
    ["an unknown queue", withField(["queue", "queueName"], "ai-analysis"), "InvalidQueue"],
    ["a timeout under 1 s", withField(["execution", "timeoutMs"], 999), "InvalidTimeout"],
    ["a timeout over 600 s", withField(["execution", "timeoutMs"], 600_001), "InvalidTimeout"],
    ["a priority under 0", withField(["queue", "defaultPriority"], -1), "InvalidPriority"],
    ["a priority over 100", withField(["queue", "defaultPriority"], 101), "InvalidPriority"],
    ["a fractional priority", withField(["queue", "defaultPriority"], 2.5), "InvalidPriority"],
    ["negative maxRetries", withField(["execution", "maxRetries"], -1), "InvalidMaxRetries"],
    ["absurd maxRetries", withField(["execution", "maxRetries"], 1_000), "InvalidMaxRetries"],
    [
      "a zero backoff",
      withField(["execution", "retryBackoff"], { type: "exponential", delay: 0 }),
      "InvalidRetryBackoff"
    ],
    [
      "a default credential mode that is not allowed",
      withField(["credential"], { allowedModes: ["platform_key"], defaultMode: "user_deepseek_key" }),
      "CredentialModeNotAllowed"
    ],
    [
      "an unknown credential mode",
      withField(["credential"], { allowedModes: ["platform_key", "openai_key"], defaultMode: "platform_key" }),
      "CredentialModeNotAllowed"
    ],
    ["an unknown projector key", withField(["projector"], "quiz_projector"), "UnknownProjector"],
    ["a missing field", withField(["execution"], undefined), "MalformedJobDefinition"],
    ["a string where a number belongs", withField(["execution", "timeoutMs"], "30s"), "MalformedJobDefinition"]
  ]

  for (const [name, change, expected] of cases) {
    it.effect(`refuses ${name} with ${expected}`, () =>
      Effect.gen(function*() {
        expect(yield* registerError(change)).toBe(expected)
      }))
  }
})
