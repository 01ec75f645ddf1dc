import { describe, expect, it } from "@effect/vitest"
import { clampProgress } from "../../../src/services/AiJobLifecycleRepository.js"

describe("clampProgress", () => {
  it("keeps progress a whole percentage in 0..100; a non-number is 0, which a rising progress ignores", () => {
    expect([clampProgress(-5), clampProgress(42.6), clampProgress(140)]).toEqual([0, 43, 100])
    expect([clampProgress(Number.NaN), clampProgress(Number.POSITIVE_INFINITY)]).toEqual([0, 0])
  })
})
