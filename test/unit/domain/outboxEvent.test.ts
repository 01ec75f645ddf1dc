import { describe, expect, it } from "@effect/vitest"
import { Duration } from "effect"
import { enqueueEventFor } from "../../../src/domain/OutboxEvent.js"

const job = { id: "job-1", jobType: "synthetic_echo", queueName: "ai-background" as const, priority: 3 }

describe("the enqueue event", () => {
  it("carries the job's routing and, only for a redispatch, the event it replaces", () => {
    const first = enqueueEventFor(job, { eventId: "event-1", dedupeKey: "ai.job.enqueue:job-1" })
    expect(first).toStrictEqual({
      id: "event-1",
      eventType: "ai.job.enqueue",
      aggregateType: "AiJob",
      aggregateId: "job-1",
      dedupeKey: "ai.job.enqueue:job-1",
      payload: { jobId: "job-1", jobType: "synthetic_echo", queueName: "ai-background", priority: 3 },
      delay: Duration.zero
    })
    const again = enqueueEventFor(job, { eventId: "event-2", dedupeKey: "redispatch:1", redispatchOf: "event-1" })
    expect(again.payload).toStrictEqual({
      jobId: "job-1",
      jobType: "synthetic_echo",
      queueName: "ai-background",
      priority: 3,
      redispatchOf: "event-1"
    })
  })
})
