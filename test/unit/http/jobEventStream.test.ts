import { describe, expect, it } from "@effect/vitest"
import { Chunk, DateTime, Effect, Fiber, Queue, Ref, Stream, TestClock } from "effect"
import type { JobEvent } from "../../../src/domain/JobEvent.js"
import type { LifecycleStatus } from "../../../src/domain/LifecycleStatus.js"
import { JobStatusResponse } from "../../../src/http/ApiSchemas.js"
import { heartbeatFrame, jobStatusFrames, sseHeartbeat } from "../../../src/http/jobEventStream.js"

const statusOf = (lifecycleStatus: LifecycleStatus, progress: number) =>
  new JobStatusResponse({
    jobId: "job-1",
    jobType: "synthetic_echo",
    lifecycleStatus,
    queueName: "ai-background",
    priority: 50,
    progress,
    createdAt: "2026-12-01T00:00:00.000Z"
  })

const eventOf = (lifecycleStatus: LifecycleStatus, progress: number): JobEvent => ({
  jobId: "job-1",
  lifecycleStatus,
  progress,
  stage: "EXECUTE",
  attempt: 1,
  at: DateTime.unsafeMake(0)
})

/** A job whose status the test sets, counting the reads the stream makes. */
const fakeJob = Effect.gen(function*() {
  const current = yield* Ref.make(statusOf("queued", 0))
  const reads = yield* Ref.make(0)
  return {
    set: (lifecycleStatus: LifecycleStatus, progress: number) => Ref.set(current, statusOf(lifecycleStatus, progress)),
    read: Effect.zipRight(Ref.update(reads, (n) => n + 1), Ref.get(current)),
    reads: Ref.get(reads)
  }
})

/** Runs the stream on a fiber, collecting its frames as they are sent. */
const follow = (stream: Stream.Stream<string>) =>
  Effect.gen(function*() {
    const frames = yield* Ref.make<ReadonlyArray<string>>([])
    const fiber = yield* Effect.fork(Stream.runForEach(stream, (frame) => Ref.update(frames, (all) => [...all, frame])))
    return { frames: Ref.get(frames), fiber }
  })

const idsOf = (frames: ReadonlyArray<string>) => frames.flatMap((frame) => /^id: (.*)$/m.exec(frame)?.[1] ?? [])

describe("jobStatusFrames: the SSE body of one job", () => {
  it.effect("sends the current status, each change, a heartbeat only after a quiet period, and ends after the terminal status", () =>
    Effect.gen(function*() {
      const job = yield* fakeJob
      const changes = yield* Queue.unbounded<JobEvent>()
      const stream = yield* follow(jobStatusFrames({ changes, read: job.read, lastEventId: undefined }))
      yield* TestClock.adjust(0)
      expect(idsOf(yield* stream.frames)).toEqual(["queued.0"])

      yield* job.set("running", 20)
      yield* Queue.offer(changes, eventOf("running", 20))
      yield* TestClock.adjust(0)
      expect(idsOf(yield* stream.frames)).toEqual(["queued.0", "running.20"])

      // Quiet for a heartbeat period: a comment, and the status read again (unchanged: not sent).
      yield* TestClock.adjust(sseHeartbeat)
      expect((yield* stream.frames).filter((frame) => frame === heartbeatFrame)).toHaveLength(1)
      expect(idsOf(yield* stream.frames)).toEqual(["queued.0", "running.20"])

      yield* job.set("succeeded", 100)
      yield* Queue.offer(changes, eventOf("succeeded", 100))
      yield* Fiber.join(stream.fiber)
      expect(idsOf(yield* stream.frames)).toEqual(["queued.0", "running.20", "succeeded.100"])
    }))

  it.effect("reads the job once for events that arrived together", () =>
    Effect.gen(function*() {
      const job = yield* fakeJob
      const changes = yield* Queue.unbounded<JobEvent>()
      const stream = yield* follow(jobStatusFrames({ changes, read: job.read, lastEventId: undefined }))
      yield* TestClock.adjust(0)
      yield* job.set("running", 55)
      yield* Queue.offerAll(changes, [eventOf("running", 30), eventOf("running", 55)])
      yield* TestClock.adjust(0)
      expect(yield* job.reads).toBe(2)
      expect(idsOf(yield* stream.frames)).toEqual(["queued.0", "running.55"])
      yield* Fiber.interrupt(stream.fiber)
    }))

  it.effect("a reconnect with the current status's id gets nothing until the job changes; a lost event is caught by the heartbeat's read", () =>
    Effect.gen(function*() {
      const job = yield* fakeJob
      yield* job.set("running", 20)
      const changes = yield* Queue.unbounded<JobEvent>()
      const stream = yield* follow(jobStatusFrames({ changes, read: job.read, lastEventId: "running.20" }))
      yield* TestClock.adjust(0)
      expect(yield* stream.frames).toEqual([])

      // The terminal change's event never arrives: the next heartbeat's read finds it.
      yield* job.set("failed", 20)
      yield* TestClock.adjust(sseHeartbeat)
      yield* Fiber.join(stream.fiber)
      expect(idsOf(yield* stream.frames)).toEqual(["failed.20"])
    }))

  it.effect("a read that fails sends nothing and the stream goes on", () =>
    Effect.gen(function*() {
      const changes = yield* Queue.unbounded<JobEvent>()
      const failures = yield* Ref.make(1)
      const read = Effect.flatMap(Ref.getAndUpdate(failures, (n) => n - 1), (left) =>
        left > 0 ? Effect.fail("store down" as const) : Effect.succeed(statusOf("succeeded", 100)))
      const frames = yield* Effect.fork(Stream.runCollect(jobStatusFrames({ changes, read, lastEventId: undefined })))
      yield* TestClock.adjust(0)
      yield* Queue.offer(changes, eventOf("succeeded", 100))
      const sent = Chunk.toReadonlyArray(yield* Fiber.join(frames))
      expect(idsOf(sent)).toEqual(["succeeded.100"])
    }))
})
