import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, ParseResult, Schema } from "effect"
import { describeIssue, hasValueFreeErrors, withValueFreeErrors } from "../../../src/domain/ValueFreeMessages.js"

/** The message a client reads for `input` against `schema`, every problem collected. */
const messageOf = <A, I>(schema: Schema.Schema<A, I>, input: unknown) => {
  const result = Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "error" })(input)
  return Either.isLeft(result) ? Effect.runSync(describeIssue(result.left.issue)) : "decoded"
}

/** One field `f` of the given schema, so each message names its field. */
const field = <A, I>(schema: Schema.Schema<A, I, never>) => Schema.Struct({ f: schema })

describe("value-free decode messages: one per rule and kind", () => {
  it("each built-in filter reads as its rule", () => {
    const cases: ReadonlyArray<readonly [Schema.Schema.AnyNoContext, unknown, string]> = [
      [Schema.String.pipe(Schema.length({ min: 2, max: 4 })), "x", "f: from 2 to 4 characters"],
      [Schema.NonEmptyString, "", "f: must not be empty"],
      [Schema.String.pipe(Schema.minLength(3)), "x", "f: at least 3 characters"],
      [Schema.String.pipe(Schema.maxLength(3)), "xxxx", "f: at most 3 characters"],
      [Schema.Number.pipe(Schema.between(1, 9)), 0, "f: must be from 1 to 9"],
      [Schema.Number.pipe(Schema.greaterThanOrEqualTo(5)), 1, "f: must be at least 5"],
      [Schema.Number.pipe(Schema.lessThanOrEqualTo(5)), 9, "f: must be at most 5"],
      [Schema.Number.pipe(Schema.int()), 1.5, "f: must be a whole number"],
      [Schema.String.pipe(Schema.pattern(/^a+$/)), "b", "f: must match ^a+$"]
    ]
    for (const [schema, input, message] of cases) expect(messageOf(field(schema), { f: input })).toBe(message)
  })

  it("a value of the wrong kind reads as what the field accepts", () => {
    const cases: ReadonlyArray<readonly [Schema.Schema.AnyNoContext, unknown, string]> = [
      [Schema.String, 1, "f: must be a string"],
      [Schema.Number, "1", "f: must be a number"],
      [Schema.Boolean, "yes", "f: must be true or false"],
      [Schema.Struct({ g: Schema.String }), [], "f: must be a JSON object"],
      [Schema.Tuple(Schema.String), "x", "f: must be an array"],
      [Schema.Literal("a", "b"), "c", "f: must be \"a\" or \"b\""],
      [
        Schema.Union(
          Schema.Number.pipe(Schema.positive(), Schema.annotations({ identifier: "PositiveAmount" })),
          Schema.Boolean
        ),
        "x",
        "f: must be PositiveAmount or true or false"
      ],
      [
        Schema.Union(Schema.Number.pipe(Schema.positive()), Schema.NumberFromString),
        true,
        "f: must be a number or a number"
      ],
      [Schema.Number.pipe(Schema.positive()), "x", "f: must be a number"],
      [Schema.Date, 1, "f: must be a string"],
      [Schema.Unknown.pipe(Schema.filter(() => false)), 1, "f: must be a valid value"],
      [Schema.Symbol.pipe(Schema.annotations({ identifier: "AnId" })), 1, "f: must be a string"]
    ]
    for (const [schema, input, message] of cases) expect(messageOf(field(schema), { f: input })).toBe(message)
  })

  it("a value that cannot be read names what it should read as, not the value", () => {
    expect(messageOf(field(Schema.NumberFromString), { f: "twelve" })).toBe("f: cannot be read as a number")
    expect(messageOf(field(Schema.NumberFromString), { f: 12 })).toBe("f: must be a string")
  })

  it("nested fields are named by their path; each field says its first problem only", () => {
    const nested = Schema.Struct({
      outer: Schema.Struct({ inner: Schema.String.pipe(Schema.minLength(2), Schema.pattern(/^b/)) })
    })
    expect(messageOf(nested, { outer: { inner: "a" } })).toBe("outer.inner: at least 2 characters")
    expect(messageOf(Schema.Struct({ a: Schema.String, b: Schema.Number }), { a: 1, b: "x" })).toBe(
      "a: must be a string; b: must be a number"
    )
    expect(messageOf(Schema.Array(Schema.Number), [1, "x"])).toBe("1: must be a number")
    expect(messageOf(Schema.String, 1)).toBe("must be a string")
  })

  it("an optional field's problem is its value's, not the union with undefined", () => {
    const optional = Schema.Struct({ f: Schema.optional(Schema.Number.pipe(Schema.int())) })
    expect(messageOf(optional, { f: 1.5 })).toBe("f: must be a whole number")
    expect(messageOf(Schema.Struct({ f: Schema.Union(Schema.Number, Schema.Boolean) }), { f: "x" })).toBe(
      "f: must be a number or true or false"
    )
  })

  it("a field's own message annotation speaks for it; a nested one yields to the rule it wraps", () => {
    const annotated = Schema.String.pipe(Schema.minLength(1), Schema.annotations({ message: () => "needs a name" }))
    expect(messageOf(field(annotated), { f: "" })).toBe("f: needs a name")
    expect(messageOf(field(annotated), { f: 1 })).toBe("f: must be a string")
    const overriding = Schema.String.pipe(
      Schema.minLength(1),
      Schema.annotations({ message: () => ({ message: "a name, please", override: true }) })
    )
    expect(messageOf(field(overriding), { f: 1 })).toBe("f: a name, please")
    const effectful = Schema.String.pipe(Schema.annotations({ message: () => Effect.succeed("from an effect") }))
    expect(messageOf(field(effectful), { f: 1 })).toBe("f: from an effect")
  })

  it("a plain annotation on an object, a transformation or a refinement's base yields to the problem inside it", () => {
    const inner = Schema.Struct({ a: Schema.String }).annotations({ message: () => "custom inner" })
    expect(messageOf(field(inner), { f: { a: 1 } })).toBe("f.a: must be a string")
    expect(messageOf(field(inner), { f: "x" })).toBe("f: custom inner")
    const digits = Schema.NumberFromString.annotations({ message: () => "digits" })
    expect(messageOf(field(digits), { f: 5 })).toBe("f: must be a string")
    expect(messageOf(field(digits), { f: "abc" })).toBe("f: digits")
    // The base a refinement narrows keeps its own annotation.
    expect(messageOf(field(Schema.String.annotations({ message: () => "a text" }).pipe(Schema.minLength(2))), { f: 5 }))
      .toBe("f: a text")
  })

  it("a rule that has no words of its own, a kind with a JSON Schema rule, a union of kinds, a field's second problem", () => {
    expect(messageOf(field(Schema.Number.pipe(Schema.multipleOf(5))), { f: 7 })).toBe("f: must be a number")
    expect(messageOf(field(Schema.Number.annotations({ jsonSchema: { minimum: 0 } })), { f: "x" })).toBe(
      "f: must be a number"
    )
    expect(messageOf(Schema.Struct({ m: Schema.optional(Schema.Union(Schema.String, Schema.Number)) }), { m: true }))
      .toBe("m: must be a string or a number")
    expect(messageOf(Schema.Struct({ m: Schema.Union(Schema.String, Schema.Number, Schema.Undefined) }), { m: true }))
      .toBe("m: must be a string or a number")
    // Two problems written at one path (a nested `b` and a key named "a.b"): the first is said.
    expect(
      messageOf(Schema.Struct({ a: Schema.Struct({ b: Schema.String }), "a.b": Schema.Number }), {
        a: { b: 1 },
        "a.b": "x"
      })
    )
      .toBe("a.b: must be a string")
  })

  it("an unknown symbol key is not named", () => {
    expect(messageOf(Schema.Struct({ a: Schema.String }), { a: "x", [Symbol.for("token")]: 1 })).toBe(
      "has a field that is not allowed"
    )
  })

  it("a field that cannot be checked synchronously", () => {
    const forbidden = Schema.transformOrFail(Schema.String, Schema.String, {
      decode: (value) => Effect.delay(ParseResult.succeed(value), "1 millis"),
      encode: ParseResult.succeed
    })
    expect(messageOf(field(forbidden), { f: "x" })).toBe("f: cannot be checked here")
  })

  it("a schema marked for value-free errors says so, and its decode error is the whole description", () => {
    const marked = withValueFreeErrors(Schema.Struct({ f: Schema.Number }))
    expect(hasValueFreeErrors(marked.ast)).toBe(true)
    expect(hasValueFreeErrors(Schema.Struct({ f: Schema.Number }).ast)).toBe(false)
    expect(hasValueFreeErrors(Schema.String.annotations({ message: () => "other" }).ast)).toBe(false)
    const result = Schema.decodeUnknownEither(marked)({ f: "secret-value" })
    expect(Either.isLeft(result) ? ParseResult.TreeFormatter.formatErrorSync(result.left) : "decoded").toBe(
      "f: must be a number"
    )
  })
})
