import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Option, TestClock } from "effect"
import { makeExecutionEngine } from "../../../src/pipeline/engine.js"
import { makeDispatcher } from "../../../src/pipeline/outbox/dispatcher.js"
import { reapOnce } from "../../../src/pipeline/reaper.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { payloadFor } from "../../../src/services/JobQueue.js"
import { memoryEngineStack, settle } from "../../support/engineStack.js"
import { recordingSpans, type SeenSpan } from "../../support/recordingSpans.js"

const traceId = "0af7651916cd43dd8448eb211c80319c"
const parentSpanId = "b7ad6b7169203331"
const traceParent = `00-${traceId}-${parentSpanId}-01`

const createEcho = (message: string) =>
  Effect.flatMap(
    AiJobService,
    (service) =>
      service.createJob({
        userId: "user-1",
        jobType: "synthetic_echo",
        targetType: "test",
        targetId: message,
        input: { message }
      })
  ).pipe(
    Effect.map(({ job }) => job)
  )

const named = (seen: ReadonlyArray<SeenSpan>, name: string) => seen.filter((span) => span.name === name)

describe("the pipeline's spans (memory layers, a recording tracer)", () => {
  it.scoped("a run is one consumer span in the job's stored trace, with a span per stage inside it", () =>
    Effect.gen(function*() {
      const job = yield* createEcho("traced")
      const engine = yield* makeExecutionEngine("worker-traced")
      const delivery = {
        queueName: job.queueName,
        queueJobId: `aijob-${job.id}`,
        payload: payloadFor({ jobId: job.id, jobType: job.jobType, createdAt: job.createdAt, traceParent }),
        attempt: 1,
        maxAttempts: 3,
        signal: new AbortController().signal
      }
      const { seen } = yield* recordingSpans(Effect.gen(function*() {
        const run = yield* Effect.fork(engine.run(delivery))
        for (let step = 0; step < 200 && Option.isNone(yield* Fiber.poll(run)); step++) yield* TestClock.adjust(50)
        return yield* Fiber.join(run)
      }))
      const [runSpan, ...others] = named(seen, "pipeline.run")
      expect(others).toStrictEqual([])
      expect([runSpan?.kind, runSpan?.traceId, runSpan?.parentSpanId]).toStrictEqual([
        "consumer",
        traceId,
        parentSpanId
      ])
      expect(Object.fromEntries(runSpan!.attributes)).toMatchObject({
        "ai_job.id": job.id,
        "ai_job.type": "synthetic_echo",
        "ai_job.queue": "ai-interactive",
        workerId: "worker-traced",
        "ai_job.lease_no": 1,
        "ai_job.attempt": 1
      })
      for (
        const stage of [
          "pipeline.prepare",
          "pipeline.resolve",
          "pipeline.execute",
          "pipeline.project",
          "pipeline.complete"
        ]
      ) {
        const spans = named(seen, stage)
        expect(spans.map((span) => span.traceId), stage).toStrictEqual([traceId])
      }
      expect(named(seen, "pipeline.execute")[0]!.attributes.get("attemptNo")).toBe(1)
      const locked = yield* Effect.flatMap(AiJobLifecycleRepository, (jobs) => jobs.findById(job.id))
      expect(Option.map(locked, (row) => row.lifecycleStatus)).toStrictEqual(Option.some("succeeded"))
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a run whose payload carries no trace context is a root span", () =>
    Effect.gen(function*() {
      const job = yield* createEcho("untraced")
      const engine = yield* makeExecutionEngine("worker-root")
      const delivery = {
        queueName: job.queueName,
        queueJobId: `aijob-${job.id}`,
        // A producer that stored no trace context says so (null): the worker starts a trace of its own.
        payload: payloadFor({ jobId: job.id, jobType: job.jobType, createdAt: job.createdAt, traceParent: null }),
        attempt: 1,
        maxAttempts: 3,
        signal: new AbortController().signal
      }
      const { seen } = yield* recordingSpans(Effect.gen(function*() {
        const run = yield* Effect.fork(engine.run(delivery).pipe(Effect.withSpan("an unrelated caller")))
        for (let step = 0; step < 200 && Option.isNone(yield* Fiber.poll(run)); step++) yield* TestClock.adjust(50)
        return yield* Fiber.join(run)
      }))
      const [runSpan] = named(seen, "pipeline.run")
      expect(runSpan?.parentSpanId).toBeUndefined()
      expect(runSpan?.traceId).not.toBe(named(seen, "an unrelated caller")[0]?.traceId)
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("the dispatcher's publish is a producer span in the job's trace; its polls are not traced", () =>
    Effect.gen(function*() {
      const { job } = yield* Effect.flatMap(
        AiJobService,
        (service) =>
          service.createJob({
            userId: "user-1",
            jobType: "synthetic_echo",
            targetType: "test",
            targetId: "t",
            input: { message: "published" }
          })
            .pipe(Effect.withSpan("http.server POST"))
      )
      const dispatcher = yield* makeDispatcher
      const { seen } = yield* recordingSpans(Effect.gen(function*() {
        yield* Effect.forkScoped(dispatcher.run)
        yield* settle
        yield* TestClock.adjust(1_000)
        yield* settle
      }))
      const stored = Option.getOrThrow(
        yield* Effect.flatMap(AiJobLifecycleRepository, (jobs) => jobs.findById(job.id))
      ).traceParent
      const [, storedTrace, storedSpan] = (stored ?? "").split("-")
      const publishes = named(seen, "dispatcher.publish")
      expect(publishes.map((span) => [span.kind, span.traceId, span.parentSpanId])).toStrictEqual([[
        "producer",
        storedTrace,
        storedSpan
      ]])
      expect(Object.fromEntries(publishes[0]!.attributes)).toMatchObject({
        "ai_job.id": job.id,
        "messaging.system": "bullmq",
        dispatcherId: expect.any(String)
      })
      expect(publishes[0]!.attributes.get("outbox.event_id")).toEqual(expect.any(String))
      // Nothing but publishes: the loops run untraced.
      expect(new Set(seen.map((span) => span.name))).toStrictEqual(new Set(["dispatcher.publish"]))
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a reaper pass is one span", () =>
    Effect.gen(function*() {
      const { seen } = yield* recordingSpans(reapOnce)
      expect(named(seen, "pipeline.reaper")).toHaveLength(1)
    }).pipe(Effect.provide(memoryEngineStack())))
})
