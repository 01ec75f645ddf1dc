import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { failuresIn } from "./support.js"

// CI runs 500 seeds, split over two files so vitest's two workers share them.
describe("deterministic simulation, seeds 251-500", () => {
  it.live("every invariant holds on every seed", () =>
    Effect.gen(function* () {
      const result = yield* failuresIn(251, 250)
      expect(result.seeds).toBe(250)
      expect(result.report).toBe("")
    }), 170_000)
})
