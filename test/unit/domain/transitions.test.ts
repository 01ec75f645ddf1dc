import { describe, expect, it } from "@effect/vitest"
import { allLifecycleStatuses, isAllowedTransition, isTerminal, legacyStatusOf } from "../../../src/domain/LifecycleStatus.js"

describe("the lifecycle transition table (ADR 1.2 / 1.3)", () => {
  const allowed = [
    ["queued", "running"],
    ["queued", "cancelled"],
    ["running", "succeeded"],
    ["running", "failed"],
    ["running", "cancelled"],
    ["running", "running"]
  ]

  it("allows exactly the ADR's transitions plus the takeover", () => {
    for (const from of allLifecycleStatuses) {
      for (const to of allLifecycleStatuses) {
        const expected = allowed.some(([f, t]) => f === from && t === to)
        expect(isAllowedTransition(from, to), `${from} → ${to}`).toBe(expected)
      }
    }
  })

  it("never leaves a terminal state", () => {
    for (const from of allLifecycleStatuses.filter(isTerminal)) {
      for (const to of allLifecycleStatuses) expect(isAllowedTransition(from, to)).toBe(false)
    }
  })

  it("shadows every state into the legacy status column (ADR 1.5)", () => {
    expect(legacyStatusOf).toStrictEqual({
      queued: "pending",
      running: "processing",
      succeeded: "completed",
      failed: "failed",
      cancelled: "cancelled"
    })
  })
})
