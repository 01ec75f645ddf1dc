import { describe, expect, it } from "@effect/vitest"
import { paddedForIn, powerOfTwoChunks } from "../../../src/layers/mysql/statementShapes.js"

describe("paddedForIn: IN lists in a few shapes", () => {
  it("pads to the next power of two with the last value, keeping every value and adding no other", () => {
    expect(paddedForIn([])).toEqual([])
    expect(paddedForIn(["a"])).toEqual(["a"])
    expect(paddedForIn(["a", "b", "c"])).toEqual(["a", "b", "c", "c"])
    expect(paddedForIn(["a", "b", "c", "d"])).toEqual(["a", "b", "c", "d"])
    const lengths = new Set(
      Array.from({ length: 500 }, (_, n) => paddedForIn(Array.from({ length: n + 1 }, (_, i) => i)).length)
    )
    expect([...lengths]).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
    expect(new Set(paddedForIn([1, 2, 3, 4, 5]))).toEqual(new Set([1, 2, 3, 4, 5]))
  })
})

describe("powerOfTwoChunks: multi-row inserts in a few shapes", () => {
  it("splits into distinct powers of two, largest first, keeping every item in order", () => {
    expect(powerOfTwoChunks([])).toEqual([])
    expect(powerOfTwoChunks(["a"])).toEqual([["a"]])
    expect(powerOfTwoChunks(["a", "b", "c"])).toEqual([["a", "b"], ["c"]])
    const hundred = Array.from({ length: 100 }, (_, i) => i)
    expect(powerOfTwoChunks(hundred).map((chunk) => chunk.length)).toEqual([64, 32, 4])
    expect(powerOfTwoChunks(hundred).flat()).toEqual(hundred)
    const sizes = new Set(
      Array.from(
        { length: 100 },
        (_, n) => powerOfTwoChunks(Array.from({ length: n + 1 }, (_, i) => i)).map((c) => c.length)
      ).flat()
    )
    expect([...sizes].sort((a, b) => a - b)).toEqual([1, 2, 4, 8, 16, 32, 64])
  })
})
