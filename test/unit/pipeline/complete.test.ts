import { describe, expect, it } from "@effect/vitest"
import { DateTime, Duration, Effect, Option } from "effect"
import { ProviderError } from "../../../src/domain/ExecutionError.js"
import type { JobEvent } from "../../../src/domain/JobEvent.js"
import { isTerminal } from "../../../src/domain/LifecycleStatus.js"
import { complete } from "../../../src/pipeline/complete.js"
import { prepare } from "../../../src/pipeline/prepare.js"
import { RunOutcome } from "../../../src/pipeline/RunningJob.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { JobEvents } from "../../../src/services/JobEvents.js"
import { payloadFor } from "../../../src/services/JobQueue.js"
import { awaitStatus, memoryEngineStack, settle, startEngine } from "../../support/engineStack.js"

const createEcho = (message: string) =>
  Effect.flatMap(
    AiJobService,
    (service) =>
      service.createJob({
        userId: "user-1",
        jobType: "synthetic_echo",
        targetType: "test",
        targetId: "t",
        input: { message }
      })
  ).pipe(
    Effect.map(({ job }) => job)
  )

/** A job of `synthetic_echo`, locked by `worker-1` as PREPARE leaves it. */
const preparedEcho = (message: string) =>
  Effect.gen(function*() {
    const job = yield* createEcho(message)
    const payload = payloadFor({ jobId: job.id, jobType: job.jobType, createdAt: job.createdAt })
    return Option.getOrThrow(yield* prepare(payload, "worker-1", Duration.millis(60_000)))
  })

const jobNow = (jobId: string) =>
  Effect.flatMap(AiJobLifecycleRepository, (jobs) => Effect.map(jobs.findById(jobId), Option.getOrThrow))

/** Runs a test on the memory engine, keeping every terminal job event the engine publishes. */
const withEvents = <A, E, R>(body: (published: ReadonlyArray<JobEvent>) => Effect.Effect<A, E, R>) => {
  const published: Array<JobEvent> = []
  return body(published).pipe(
    Effect.updateService(JobEvents, (events) => ({
      ...events,
      publish: (event: JobEvent) =>
        Effect.zipRight(
          Effect.sync(() => isTerminal(event.lifecycleStatus) && published.push(event)),
          events.publish(event)
        )
    })),
    Effect.provide(memoryEngineStack())
  )
}

describe("COMPLETE records how a run ended", () => {
  it.scoped("a run that succeeds publishes one terminal job event, the committed row's", () =>
    withEvents((published) =>
      Effect.gen(function*() {
        yield* startEngine()
        const job = yield* createEcho("finish me")
        const done = yield* awaitStatus(job.id, ["succeeded", "failed", "cancelled"])
        yield* settle
        expect(done.lifecycleStatus).toBe("succeeded")
        expect(published).toStrictEqual([
          {
            jobId: job.id,
            lifecycleStatus: "succeeded",
            progress: 100,
            stage: "COMPLETE",
            attempt: 1,
            at: DateTime.unsafeFromDate(done.updatedAt)
          }
        ])
      })
    ))

  it.scoped("a failure: the job fails with the error's code, its public text and a scrubbed internal message", () =>
    withEvents((published) =>
      Effect.gen(function*() {
        const prepared = yield* preparedEcho("fail me")
        const error = new ProviderError({
          code: "PROVIDER_UNAVAILABLE",
          message: "503 for key sk-abcdefghijklmnopqrstuvwxyz123456"
        })
        yield* complete(prepared, RunOutcome.Failed({ error, calls: 3 }))
        const job = yield* jobNow(prepared.job.id)
        expect(job.lifecycleStatus).toBe("failed")
        expect(job.errorCode).toBe("PROVIDER_UNAVAILABLE")
        expect(job.publicErrorMessage).toBe("The AI provider is unavailable right now. Please try again later.")
        expect(job.internalErrorMessage).toMatch(
          /^ProviderError PROVIDER_UNAVAILABLE after 3 provider call\(s\): 503 for key /
        )
        expect(job.internalErrorMessage).not.toContain("sk-abcdefghijklmnopqrstuvwxyz123456")
        expect(published.map((event) => [event.jobId, event.lifecycleStatus, event.errorCode])).toStrictEqual([
          [job.id, "failed", "PROVIDER_UNAVAILABLE"]
        ])
      })
    ))

  it.scoped("a requested cancel: the job is cancelled and its terminal event says so", () =>
    withEvents((published) =>
      Effect.gen(function*() {
        const prepared = yield* preparedEcho("cancel me")
        yield* Effect.flatMap(AiJobLifecycleRepository, (jobs) => jobs.requestCancel(prepared.job.id))
        yield* complete(prepared, RunOutcome.CancelRequested())
        expect((yield* jobNow(prepared.job.id)).lifecycleStatus).toBe("cancelled")
        expect(published.map((event) => [event.jobId, event.lifecycleStatus])).toStrictEqual([[
          prepared.job.id,
          "cancelled"
        ]])
      })
    ))

  it.scoped("a lost lease writes nothing and publishes nothing: the new owner records the end", () =>
    withEvents((published) =>
      Effect.gen(function*() {
        const prepared = yield* preparedEcho("lose me")
        yield* complete(prepared, RunOutcome.LockLost())
        const job = yield* jobNow(prepared.job.id)
        expect([job.lifecycleStatus, job.lockedBy, job.errorCode]).toStrictEqual(["running", "worker-1", null])
        expect(published).toStrictEqual([])
      })
    ))

  it.scoped("a hand-off releases the lock and gives the delivery back to the queue", () =>
    withEvents((published) =>
      Effect.gen(function*() {
        const prepared = yield* preparedEcho("hand me back")
        const given = yield* Effect.either(complete(prepared, RunOutcome.HandedOff()))
        expect(given).toMatchObject({ _tag: "Left", left: { _tag: "JobHandedOff", jobId: prepared.job.id } })
        const job = yield* jobNow(prepared.job.id)
        expect([job.lifecycleStatus, job.lockedBy]).toStrictEqual(["running", null])
        expect(published).toStrictEqual([])
      })
    ))
})
