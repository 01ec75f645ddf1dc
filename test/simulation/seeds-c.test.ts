import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { firstExtendedSeed } from "../../src/simulation/runner.js"
import { failuresIn, seedChunks } from "./support.js"

// The extended fault set (rolling restarts, a worker frozen in PROJECT, credential refusals,
// bursts of creates meeting hanging calls, jobs whose snapshot differs from their input) runs on
// these seeds; seeds 1-500 replay as they did before it.
describe(`deterministic simulation, extended faults, seeds ${firstExtendedSeed}-${firstExtendedSeed + 59}`, () => {
  for (const chunk of seedChunks(firstExtendedSeed, 60, 10)) {
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
