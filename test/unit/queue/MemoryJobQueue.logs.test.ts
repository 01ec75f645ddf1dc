import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer, Queue } from "effect"
import { QueueSettings } from "../../../src/config/QueueSettings.js"
import type { QueueName } from "../../../src/domain/QueueName.js"
import { MemoryJobQueueControl, MemoryJobQueueLive } from "../../../src/layers/memory/MemoryJobQueue.js"
import { type JobDelivery, JobQueue, payloadFor, queueJobIdFor } from "../../../src/services/JobQueue.js"
import { LogCapture, LogCaptureLayer } from "../../support/logCapture.js"

// What the memory queue tells its operator: the fault it was told to inject, a payload it could
// not read, a delivery whose handler failed or died. Each test builds its own queue.
const queueLayer = () =>
  MemoryJobQueueLive.pipe(
    Layer.provide(
      QueueSettings.make({
        queues: { "ai-background": { attempts: 3, backoffDelay: Duration.millis(100), concurrency: 1 } }
      })
    ),
    Layer.provideMerge(LogCaptureLayer)
  )

const bg: QueueName = "ai-background"
const payload = (jobId: string) =>
  payloadFor({ jobId, jobType: "quiz_generation", createdAt: new Date("2026-06-20T08:00:00.000Z") })

const linesWith = (text: string) =>
  Effect.map(
    Effect.flatMap(LogCapture, (capture) => capture.lines),
    (lines) => lines.filter((line) => line.includes(text))
  )

/** Yields until some log line contains `text`; those lines. */
const logged = (text: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1_000; i++) {
      const lines = yield* linesWith(text)
      if (lines.length > 0) return lines
      yield* Effect.yieldNow()
    }
    return yield* Effect.dieMessage(`never logged: ${text}`)
  })

describe("MemoryJobQueue's errors and log lines", () => {
  it.scoped("an injected outage refuses adds with a message saying so", () =>
    Effect.gen(function*() {
      yield* Effect.flatMap(MemoryJobQueueControl, (control) => control.setUnreachable(true))
      const refused = yield* Effect.flip(
        Effect.flatMap(JobQueue, (queue) => queue.add({ queueName: bg, payload: payload("job-1"), priority: 50 }))
      )
      expect([refused._tag, refused.operation, refused.message]).toStrictEqual([
        "JobQueueUnavailable",
        "add",
        "queue unreachable (injected fault)"
      ])
    }).pipe(Effect.provide(queueLayer())))

  it.scoped("a raw job whose payload does not decode is dropped with an error naming the queue, the queue job and the bad fields", () =>
    Effect.gen(function*() {
      const queue = yield* JobQueue
      const control = yield* MemoryJobQueueControl
      const deliveries = yield* Queue.unbounded<JobDelivery>()
      yield* queue.consume(bg, (delivery) => Queue.offer(deliveries, delivery))
      yield* control.addRaw(bg, "raw-1", { jobId: 42 })
      const [line] = yield* logged("Queue payload does not decode; job dropped, its row is left for the reaper")
      expect(line).toContain(`queue=${bg}`)
      expect(line).toContain("queueJobId=raw-1")
      expect(line).toContain("invalidFields=")
      expect(line).toContain("jobId")
      expect(yield* control.jobIds(bg)).toStrictEqual([])
      expect(yield* Queue.size(deliveries)).toBe(0)
    }).pipe(Effect.provide(queueLayer())))

  it.scoped("a delivery that fails or dies is logged with its job, attempt and whether it failed or died", () =>
    Effect.gen(function*() {
      const queue = yield* JobQueue
      yield* queue.consume(
        bg,
        (delivery) => delivery.payload.jobId === "job-fails" ? Effect.fail("refused") : Effect.die("bug")
      )
      yield* queue.add({ queueName: bg, payload: payload("job-fails"), priority: 50 })
      yield* queue.add({ queueName: bg, payload: payload("job-dies"), priority: 50 })
      yield* logged("jobId=job-dies")
      const lines = yield* linesWith("Queue delivery failed; the queue retries it while attempts remain")
      const of = (jobId: string) => lines.find((line) => line.includes(`jobId=${jobId}`)) ?? ""
      for (const [jobId, reason] of [["job-fails", "failure"], ["job-dies", "defect"]] as const) {
        expect(of(jobId), jobId).toContain(`reason=${reason}`)
        expect(of(jobId), jobId).toContain(`queue=${bg}`)
        expect(of(jobId), jobId).toContain(`queueJobId=${queueJobIdFor(jobId)}`)
        expect(of(jobId), jobId).toContain("attempt=1")
      }
    }).pipe(Effect.provide(queueLayer())))
})
