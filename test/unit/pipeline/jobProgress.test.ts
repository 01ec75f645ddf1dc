import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Layer, Option, Stream, TestClock } from "effect"
import type { JobEvent } from "../../../src/domain/JobEvent.js"
import { AiGateway } from "../../../src/services/AiGateway.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { JobEvents } from "../../../src/services/JobEvents.js"
import { reportProgress } from "../../../src/services/JobProgress.js"
import { awaitStatus, memoryEngineStack, settle, startEngine } from "../../support/engineStack.js"

const heartbeatMs = 5_000

/**
 * A provider that streams its answer: it reports how far it got as chunks arrive (here at the
 * test's say-so), as a gateway reading `stream: true` would, then answers the echo.
 */
const streamingProvider = (
  chunks: ReadonlyArray<{ readonly percent: number; readonly arrived: Deferred.Deferred<void> }>,
  lastChunk: Deferred.Deferred<void>
) =>
  Layer.succeed(AiGateway, {
    generate: (request) =>
      Effect.gen(function*() {
        for (const chunk of chunks) {
          yield* Deferred.await(chunk.arrived)
          yield* reportProgress(chunk.percent)
        }
        yield* Deferred.await(lastChunk)
        const message = typeof request.input === "object" && request.input !== null && "message" in request.input
          ? String(request.input.message)
          : ""
        return {
          text: JSON.stringify({ echo: message }),
          json: { echo: message },
          usage: { promptTokens: 3, completionTokens: 5, totalTokens: 8 },
          provider: request.provider,
          model: request.model,
          latencyMs: 1,
          finishReason: "stop"
        }
      })
  })

const progressOf = (jobId: string) =>
  Effect.flatMap(AiJobLifecycleRepository, (jobs) => jobs.findById(jobId)).pipe(
    Effect.map((job) => Option.getOrThrow(job).progress)
  )

describe("progress reported during EXECUTE (memory layers, TestClock)", () => {
  it.scoped("rides on the lease keeper's next beat, held within 20..79 and never backwards", () =>
    Effect.gen(function*() {
      const chunks = yield* Effect.forEach(
        [45, 10, 95],
        (percent) => Effect.map(Deferred.make<void>(), (arrived) => ({ percent, arrived }))
      )
      const answered = yield* Deferred.make<void>()
      const events: Array<JobEvent> = []
      yield* Effect.gen(function*() {
        const { job } = yield* Effect.flatMap(
          AiJobService,
          (service) =>
            service.createJob({
              userId: "user-1",
              jobType: "synthetic_echo",
              targetType: "test",
              targetId: "t",
              input: { message: "hi" }
            })
        )
        const heard = yield* Effect.flatMap(JobEvents, (jobEvents) => jobEvents.subscribe(job.id))
        yield* Effect.forkScoped(
          Stream.runForEach(Stream.fromQueue(heard), (event) => Effect.sync(() => events.push(event)))
        )
        yield* startEngine()
        yield* awaitStatus(job.id, ["running"], { stepMs: 10 })
        yield* settle

        // Reported, but not written by itself: the row shows the lock's 5 until a beat carries it.
        yield* Deferred.succeed(chunks[0]!.arrived, undefined)
        yield* settle
        expect(yield* progressOf(job.id)).toBe(5)
        yield* TestClock.adjust(heartbeatMs)
        yield* settle
        expect(yield* progressOf(job.id)).toBe(45)

        // Lower is ignored; higher than the call's range stops short of the validated output's 80.
        yield* Deferred.succeed(chunks[1]!.arrived, undefined)
        yield* settle
        yield* TestClock.adjust(heartbeatMs)
        yield* settle
        expect(yield* progressOf(job.id)).toBe(45)
        yield* Deferred.succeed(chunks[2]!.arrived, undefined)
        yield* settle
        yield* TestClock.adjust(heartbeatMs)
        yield* settle
        expect(yield* progressOf(job.id)).toBe(79)
        yield* Deferred.succeed(answered, undefined)
        const done = yield* awaitStatus(job.id, ["succeeded", "failed"], { stepMs: 100 })
        expect([done.lifecycleStatus, done.progress]).toStrictEqual(["succeeded", 100])
        const seen = events.filter((event) => event.jobId === job.id).map((event) => event.progress)
        // Announced once per raised value, after the beat that wrote it.
        expect(seen).toStrictEqual([5, 45, 79, 100])
      }).pipe(Effect.provide(memoryEngineStack({ gateway: streamingProvider(chunks, answered) })))
    }))
})
