import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import { defineJobType, failedPaths, formatProblems } from "../../../src/domain/JobType.js"

// Built inside each test, not at module load, so mutation testing sees which test covers it.
const demoType = () =>
  defineJobType({
    definition: { jobType: "demo" },
    input: Schema.Struct({ count: Schema.Number, topic: Schema.String }),
    output: Schema.Struct({ cards: Schema.Array(Schema.String) }),
    checkOutput: (input, output) => (output.cards.length > input.count ? [`at most ${input.count} cards`] : [])
  })

describe("defineJobType", () => {
  it.effect("rejects input with every problem by field, unknown fields included, naming the job type", () =>
    Effect.gen(function*() {
      const demo = demoType()
      const error = yield* Effect.flip(demo.decodeInput({ count: "three", extra: 1 }))
      expect(error.jobType).toBe("demo")
      // One value-free message names every field with a problem ("count: ...; extra: ...; topic: ...").
      const fields = error.problems.flatMap((problem) => problem.split("; ")).map((problem) => problem.split(":")[0])
      expect(fields.sort()).toStrictEqual(["count", "extra", "topic"])
      expect(yield* demo.decodeInput({ count: 3, topic: "cells" })).toStrictEqual({ count: 3, topic: "cells" })
    }))

  it.effect("an output that breaks its schema or a rule of its input is a validation error with the problems", () =>
    Effect.gen(function*() {
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

  it.effect("each refusal of an output says which check refused it", () =>
    Effect.gen(function*() {
      const demo = demoType()
      const input = { count: 1, topic: "cells" }
      expect((yield* Effect.flip(demo.decodeOutput({ cards: [1] }, input))).message).toBe(
        "output of demo does not match its schema"
      )
      expect((yield* Effect.flip(demo.decodeOutput({ cards: ["a", "b"] }, input))).message).toBe(
        "output of demo breaks a rule of its input"
      )
      // A stored input that no longer decodes cannot be checked against: refused, with no problem to show the model.
      const stale = yield* Effect.flip(demo.decodeOutput({ cards: ["a"] }, { count: "one", topic: "cells" }))
      expect(stale).toMatchObject({
        code: "VALIDATION_OUTPUT_SCHEMA",
        message: "input of demo no longer decodes",
        problems: []
      })
      // A failure of the whole value has no path to put before its message.
      const root = yield* Effect.flip(demo.decodeOutput("cards", input))
      expect(root.problems).toHaveLength(1)
      expect(root.problems[0]?.startsWith("Expected")).toBe(true)
    }))

  it.effect("a job type is read from an object's jobType, whatever its kind; anything else is unknown", () =>
    Effect.gen(function*() {
      const nameOf = (definition: unknown) =>
        Effect.flip(
          defineJobType({ definition, input: Schema.Struct({ a: Schema.String }), output: Schema.Struct({}) })
            .decodeInput({})
        )
          .pipe(Effect.map((error) => error.jobType))
      expect(yield* nameOf({ jobType: 7 })).toBe("7")
      expect(yield* nameOf({ type: "demo" })).toBe("unknown")
      expect(yield* nameOf("demo")).toBe("unknown")
    }))

  it("failure paths and problems name fields, once each, and never the value", () => {
    const Shape = Schema.Struct({
      a: Schema.Struct({ b: Schema.String }),
      c: Schema.Union(Schema.Number, Schema.Boolean)
    })
    const errorOf = (value: unknown) => {
      const result = Schema.decodeUnknownEither(Shape, { errors: "all" })(value)
      if (Either.isRight(result)) throw new Error("expected a decode failure")
      return result.left
    }
    const both = errorOf({ a: { b: 1 }, c: "sk-secret" })
    // The union's two refusals at `c` are one path.
    expect(formatProblems(both).filter((problem) => problem.startsWith("c: "))).toHaveLength(2)
    expect(failedPaths(both)).toBe("a.b, c")
    expect(failedPaths(both)).not.toContain("sk-secret")
    expect(failedPaths(errorOf("sk-secret"))).toBe("(root)")
  })

  it.effect("a definition without a job type is named unknown", () =>
    Effect.gen(function*() {
      const nameless = defineJobType({
        definition: null,
        input: Schema.Struct({ a: Schema.String }),
        output: Schema.Struct({})
      })
      const error = yield* Effect.flip(nameless.decodeInput({}))
      expect(error.jobType).toBe("unknown")
      // Without output rules the input is not decoded again: the output alone decides.
      expect(yield* nameless.decodeOutput({}, { stale: true })).toStrictEqual({})
    }))
})
