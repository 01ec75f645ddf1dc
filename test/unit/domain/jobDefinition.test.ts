import { describe, expect, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import { JobPriority, JobTimeoutMs, priorityRule } from "../../../src/domain/JobDefinition.js"
import { formatProblems } from "../../../src/domain/JobType.js"

describe("definition bounds", () => {
  const messageOf = <A, I>(schema: Schema.Schema<A, I>, value: unknown) => {
    const result = Schema.decodeUnknownEither(schema)(value)
    return Either.isLeft(result) ? formatProblems(result.left).join("; ") : "decoded"
  }

  // The registry reports a definition's problems in these words.
  it("a priority or a timeout out of bounds is refused in the rule's own words", () => {
    expect(messageOf(JobPriority, 101)).toBe(priorityRule)
    // The rule speaks for the whole chain: a fraction breaks the integer check beneath it.
    expect(messageOf(JobPriority, 1.5)).toBe(priorityRule)
    expect(messageOf(JobPriority, 100)).toBe("decoded")
    expect(messageOf(JobTimeoutMs, 999)).toBe("must be from 1000 to 600000 ms")
    expect(messageOf(JobTimeoutMs, 600_000)).toBe("decoded")
  })
})
