import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { faultKinds, planFaults } from "../../chaos/faults.js"

describe("chaos fault plan", () => {
  it.effect("holds every fault kind, inside the window, the same for the same seed", () =>
    Effect.gen(function*() {
      const window = { startMs: 5_000, endMs: 63_000, extra: 3 }
      const plan = yield* planFaults(42, window)
      expect(plan).toHaveLength(faultKinds.length + 3)
      expect(new Set(plan.map((fault) => fault.kind))).toEqual(new Set(faultKinds))
      for (const fault of plan) {
        expect(fault.atMs).toBeGreaterThanOrEqual(window.startMs)
        expect(fault.atMs).toBeLessThanOrEqual(window.endMs)
      }
      expect(yield* planFaults(42, window)).toEqual(plan)
      expect(yield* planFaults(43, window)).not.toEqual(plan)
    }))
})
