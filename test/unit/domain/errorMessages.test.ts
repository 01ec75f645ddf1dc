import { describe, expect, it } from "@effect/vitest"
import { InvalidJobInput } from "../../../src/domain/JobCreationErrors.js"
import { IllegalTransition } from "../../../src/domain/LifecycleErrors.js"

// The messages operators read in logs (the API maps these errors to its own value-free bodies).
describe("domain error messages", () => {
  it("an illegal transition names the job and both states", () => {
    expect(new IllegalTransition({ jobId: "job-1", from: "succeeded", to: "running" }).message).toBe(
      "job job-1: succeeded → running is not an allowed transition"
    )
  })

  it("invalid input names the job type and every problem, in order", () => {
    expect(
      new InvalidJobInput({
        jobType: "flashcard_generation",
        problems: ["sourceText is missing", "count must be at most 20"]
      }).message
    ).toBe(
      "invalid input for flashcard_generation: sourceText is missing; count must be at most 20"
    )
  })
})
