import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { defineJobType } from "../../../src/domain/JobType.js"

// Built inside each test, not at module load, so mutation testing sees which test covers it.
const demoType = () => defineJobType({
  definition: { jobType: "demo" },
  input: Schema.Struct({ count: Schema.Number, topic: Schema.String }),
  output: Schema.Struct({ cards: Schema.Array(Schema.String) }),
  checkOutput: (input, output) => (output.cards.length > input.count ? [`at most ${input.count} cards`] : [])
})

describe("defineJobType", () => {
  it.effect("rejects input with every problem by field, unknown fields included, naming the job type", () =>
    Effect.gen(function* () {
      const demo = demoType()
      const error = yield* Effect.flip(demo.decodeInput({ count: "three", extra: 1 }))
      expect(error.jobType).toBe("demo")
      // One value-free message names every field with a problem ("count: ...; extra: ...; topic: ...").
      const fields = error.problems.flatMap((problem) => problem.split("; ")).map((problem) => problem.split(":")[0])
      expect(fields.sort()).toStrictEqual(["count", "extra", "topic"])
      expect(yield* demo.decodeInput({ count: 3, topic: "cells" })).toStrictEqual({ count: 3, topic: "cells" })
    }))

  it.effect("an output that breaks its schema or a rule of its input is a validation error with the problems", () =>
    Effect.gen(function* () {
      const demo = demoType()
      const input = { count: 1, topic: "cells" }
      const malformed = yield* Effect.flip(demo.decodeOutput({ cards: [1, 2] }, input))
      expect(malformed._tag).toBe("ValidationError")
      expect(malformed.code).toBe("VALIDATION_OUTPUT_SCHEMA")
      expect(malformed.problems.map((problem) => problem.split(":")[0])).toStrictEqual(["cards.0", "cards.1"])
      const tooMany = yield* Effect.flip(demo.decodeOutput({ cards: ["a", "b"] }, input))
      expect(tooMany.problems).toStrictEqual(["at most 1 cards"])
      expect(yield* demo.decodeOutput({ cards: ["a"] }, input)).toStrictEqual({ cards: ["a"] })
    }))

  it.effect("a definition without a job type is named unknown", () =>
    Effect.gen(function* () {
      const nameless = defineJobType({ definition: null, input: Schema.Struct({ a: Schema.String }), output: Schema.Struct({}) })
      const error = yield* Effect.flip(nameless.decodeInput({}))
      expect(error.jobType).toBe("unknown")
      // Without output rules the input is not decoded again: the output alone decides.
      expect(yield* nameless.decodeOutput({}, { stale: true })).toStrictEqual({})
    }))
})
