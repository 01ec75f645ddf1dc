import { describe, expect, it } from "@effect/vitest"
import { DateTime, Schema } from "effect"
import { JobEventJson, progressAt, stageOf } from "../../../src/domain/JobEvent.js"

describe("the stage a job shows", () => {
  it("a running job's stage starts at each progress point and lasts until the next", () => {
    const running = (progress: number) => stageOf({ lifecycleStatus: "running", progress })
    expect([0, progressAt.PREPARE, progressAt.RESOLVE - 1].map(running)).toStrictEqual([
      "PREPARE",
      "PREPARE",
      "PREPARE"
    ])
    expect([progressAt.RESOLVE, progressAt.EXECUTE - 1].map(running)).toStrictEqual(["RESOLVE", "RESOLVE"])
    expect([progressAt.EXECUTE, progressAt.VALIDATED - 1].map(running)).toStrictEqual(["EXECUTE", "EXECUTE"])
    expect([progressAt.VALIDATED, progressAt.PROJECTED].map(running)).toStrictEqual(["PROJECT", "PROJECT"])
  })

  it("a queued job is QUEUED and every terminal job COMPLETE, whatever its progress", () => {
    expect(stageOf({ lifecycleStatus: "queued", progress: 50 })).toBe("QUEUED")
    for (const lifecycleStatus of ["succeeded", "failed", "cancelled"] as const) {
      expect(stageOf({ lifecycleStatus, progress: 20 })).toBe("COMPLETE")
    }
  })

  it("an event's wire form carries ids and state, and an error code only when there is one", () => {
    const event = {
      jobId: "j-1",
      lifecycleStatus: "failed" as const,
      progress: 20,
      stage: "COMPLETE" as const,
      attempt: 2,
      at: DateTime.unsafeMake(0)
    }
    const wire = Schema.encodeSync(JobEventJson)(event)
    expect(JSON.parse(wire)).toStrictEqual({ ...event, at: "1970-01-01T00:00:00.000Z" })
    expect(
      Schema.decodeSync(JobEventJson)(Schema.encodeSync(JobEventJson)({ ...event, errorCode: "CANCELLED" })).errorCode
    ).toBe("CANCELLED")
  })
})
