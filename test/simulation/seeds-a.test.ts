import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { failuresIn, seedChunks } from "./support.js"

// CI runs 500 seeds, split over two files so vitest's two workers share them.
describe("deterministic simulation, seeds 1-250", () => {
  for (const chunk of seedChunks(1, 250, 10)) {
    it.live(
      `every invariant holds on every seed (${chunk.from}-${chunk.from + chunk.count - 1})`,
      () =>
        Effect.gen(function*() {
          const result = yield* failuresIn(chunk.from, chunk.count)
          expect(result.seeds).toBe(chunk.count)
          expect(result.report).toBe("")
        }),
      170_000
    )
  }
})
