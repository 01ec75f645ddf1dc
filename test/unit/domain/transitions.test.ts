import { describe, expect, it } from "@effect/vitest"
import {
  allLifecycleStatuses,
  isAllowedTransition,
  isTerminal,
  legacyStatusOf
} from "../../../src/domain/LifecycleStatus.js"

describe("the lifecycle transition table", () => {
  const allowed = [
    ["queued", "running"],
    ["queued", "cancelled"],
    ["running", "succeeded"],
    ["running", "failed"],
    ["running", "cancelled"],
    ["running", "running"]
  ]

  it("allows exactly the spec's transitions plus the takeover", () => {
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

  it("shadows every state into the legacy status column", () => {
    expect(legacyStatusOf).toStrictEqual({
      queued: "pending",
      running: "processing",
      succeeded: "completed",
      failed: "failed",
      cancelled: "cancelled"
    })
  })
})
