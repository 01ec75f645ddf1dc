import { describe, expect, layer } from "@effect/vitest"
import { Duration, Effect, Either, type Layer, Option, Schema } from "effect"
import type { AiJob, JobLease } from "../../src/domain/AiJob.js"
import { byExpiredLock, byLease, leaseOf } from "../../src/domain/AiJob.js"
import { newId } from "../../src/domain/Ids.js"
import { JobFinishedEvent } from "../../src/domain/JobFinishedEvent.js"
import { PersistenceError } from "../../src/domain/PersistenceError.js"
import { AiJobLifecycleRepository } from "../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../src/services/AiJobService.js"
import { ArtifactRepository } from "../../src/services/ArtifactRepository.js"
import { OutboxRepository } from "../../src/services/outbox/OutboxRepository.js"
import { UnitOfWork } from "../../src/services/UnitOfWork.js"
import type { ContractServices } from "./AiJobLifecycleRepository.contract.js"

export interface TerminalEventsHarness {
  readonly name: string
  readonly layer: Layer.Layer<ContractServices | ArtifactRepository, unknown>
  readonly advance: (millis: number) => Effect.Effect<void>
  readonly liveClock: boolean
  readonly lockTtlMs: number
}

/** What only the job's input holds: it must never reach an event. */
const secretInput = "input-that-never-leaves-the-job"

const freshJob = Effect.gen(function*() {
  const service = yield* AiJobService
  const { job } = yield* service.createJob({
    userId: `user-${yield* newId}`,
    jobType: "synthetic_echo",
    targetType: "test",
    targetId: "t-1",
    input: { message: secretInput }
  })
  return job
})

const running = (workerId = "worker-a", ttl = 5_000) =>
  Effect.flatMap(
    freshJob,
    (job) => Effect.flatMap(AiJobLifecycleRepository, (repo) => repo.lockJob(job.id, workerId, Duration.millis(ttl)))
  )

const leaseFor = (job: AiJob): JobLease => {
  const lease = leaseOf(job)
  if (lease === undefined) throw new Error(`job ${job.id} is not running`)
  return lease
}

const decodeBody = Schema.decodeUnknownSync(JobFinishedEvent)

/** The job's events other than its enqueue: its terminal event, if it has one (and no second). */
const terminalEventsOf = (jobId: string) =>
  Effect.flatMap(OutboxRepository, (outbox) => outbox.findByAggregate(jobId)).pipe(
    Effect.map((events) => events.filter((event) => event.eventType !== "ai.job.enqueue"))
  )

/** Exactly one terminal event, pending in the notify lane; its body, checked to carry no input. */
const theTerminalEvent = (jobId: string) =>
  Effect.gen(function*() {
    const events = yield* terminalEventsOf(jobId)
    expect(events).toHaveLength(1)
    const event = events[0]!
    expect(event.lane).toBe("notify")
    expect(event.status).toBe("pending")
    expect(event.aggregateType).toBe("AiJob")
    expect(event.deliveredTo).toEqual([])
    expect(JSON.stringify(event.payload)).not.toContain(secretInput)
    const body = decodeBody(event.payload)
    expect(body.type).toBe(event.eventType)
    return { event, body }
  })

const failure = {
  errorCode: "PROVIDER_UNAVAILABLE",
  publicErrorMessage: "unavailable",
  internalErrorMessage: "503 from x"
}

/**
 * docs/architecture.md §6.8: every write that ends a job writes its terminal event in the same
 * transaction, on every backing: no terminal state without its event, no event without its state.
 */
export const terminalEventsContract = (harness: TerminalEventsHarness) =>
  describe(`terminal events of the lifecycle repository (${harness.name})`, () => {
    const ttl = harness.lockTtlMs

    layer(harness.layer, { timeout: 60_000, excludeTestServices: harness.liveClock })((it) => {
      it.effect("a success announces itself once, with the artifacts its transaction recorded, and no input", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const artifacts = yield* ArtifactRepository
          const unitOfWork = yield* UnitOfWork
          const job = yield* running()
          // As PROJECT: the artifacts and the success in one transaction; the event reads them.
          const done = yield* unitOfWork.transaction(
            Effect.zipRight(
              artifacts.record(job.id, [
                { artifactType: "flashcard", artifactId: `${job.id}-2`, ordinal: 2 },
                { artifactType: "flashcard", artifactId: `${job.id}-1`, ordinal: 1 }
              ]),
              repo.markSucceeded(leaseFor(job), "a".repeat(64), { locked: job })
            )
          )
          const { body, event } = yield* theTerminalEvent(job.id)
          expect(event.eventType).toBe("ai.job.succeeded")
          expect(event.dedupeKey).toBe(`ai.job.finished:${job.id}`)
          expect(body).toStrictEqual({
            type: "ai.job.succeeded",
            timestamp: done.finishedAt!.toISOString(),
            data: {
              jobId: job.id,
              jobType: "synthetic_echo",
              lifecycleStatus: "succeeded",
              finishedAt: done.finishedAt!.toISOString(),
              artifacts: [
                { artifactType: "flashcard", artifactId: `${job.id}-1` },
                { artifactType: "flashcard", artifactId: `${job.id}-2` }
              ]
            }
          })
        }))

      it.effect("a success given its artifacts lists those", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const job = yield* running()
          yield* repo.markSucceeded(leaseFor(job), "b".repeat(64), {
            locked: job,
            artifacts: [{ artifactType: "synthetic_echo_result", artifactId: "r-1" }]
          })
          const { body } = yield* theTerminalEvent(job.id)
          expect(body.data.artifacts).toStrictEqual([{ artifactType: "synthetic_echo_result", artifactId: "r-1" }])
        }))

      it.effect("a failure announces its code; a cancel by the worker and a cancel of a queued job announce the cancel", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const failing = yield* running()
          const failed = yield* repo.markFailed(byLease(leaseFor(failing)), failure)
          const failedEvent = yield* theTerminalEvent(failing.id)
          expect(failedEvent.event.eventType).toBe("ai.job.failed")
          expect(failedEvent.body.data).toStrictEqual({
            jobId: failing.id,
            jobType: "synthetic_echo",
            lifecycleStatus: "failed",
            errorCode: "PROVIDER_UNAVAILABLE",
            finishedAt: failed.finishedAt!.toISOString(),
            artifacts: []
          })

          const cancelling = yield* running()
          // A request on a running job ends nothing yet: no event until the worker stops.
          yield* repo.requestCancel(cancelling.id)
          expect(yield* terminalEventsOf(cancelling.id)).toHaveLength(0)
          yield* repo.markCancelled(byLease(leaseFor(cancelling)))
          const cancelledEvent = yield* theTerminalEvent(cancelling.id)
          expect(cancelledEvent.event.eventType).toBe("ai.job.cancelled")
          expect(cancelledEvent.body.data.errorCode).toBe("CANCELLED")

          const queued = yield* freshJob
          yield* repo.requestCancel(queued.id)
          const queuedEvent = yield* theTerminalEvent(queued.id)
          expect(queuedEvent.event.eventType).toBe("ai.job.cancelled")
          expect(queuedEvent.body.data.lifecycleStatus).toBe("cancelled")
        }))

      it.effect("the reaper's fenced failure of a lost job announces it too", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const job = yield* running("worker-a", ttl)
          yield* harness.advance(ttl * 2)
          const expired = (yield* repo.findExpiredLocks(Duration.millis(ttl / 2), 1000)).find((row) =>
            row.id === job.id
          )
          expect(expired).toBeDefined()
          yield* repo.markFailed(byExpiredLock(expired!, Duration.millis(ttl / 2)), {
            errorCode: "INTERNAL_WORKER_LOST",
            publicErrorMessage: "lost",
            internalErrorMessage: "lock expired"
          })
          const { body } = yield* theTerminalEvent(job.id)
          expect(body.type).toBe("ai.job.failed")
          expect(body.data.errorCode).toBe("INTERNAL_WORKER_LOST")
        }))

      it.effect("a terminal write rolled back with its transaction leaves neither the state nor the event", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const unitOfWork = yield* UnitOfWork
          const job = yield* running()
          const result = yield* Effect.either(
            unitOfWork.transaction(
              Effect.zipRight(
                repo.markSucceeded(leaseFor(job), "c".repeat(64), { locked: job }),
                Effect.fail(new PersistenceError({ operation: "test", message: "roll back" }))
              )
            )
          )
          expect(Either.isLeft(result)).toBe(true)
          expect(Option.getOrThrow(yield* repo.findById(job.id)).lifecycleStatus).toBe("running")
          expect(yield* terminalEventsOf(job.id)).toHaveLength(0)
          // The job still ends later, announced once.
          yield* repo.markFailed(byLease(leaseFor(job)), failure)
          expect((yield* theTerminalEvent(job.id)).event.eventType).toBe("ai.job.failed")
        }))

      it.effect("a refused terminal write announces nothing, and a job ends (and is announced) only once", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const job = yield* running()
          const stale = { ...leaseFor(job), leaseNo: job.leaseNo + 1 }
          expect(Either.isLeft(yield* Effect.either(repo.markFailed(byLease(stale), failure)))).toBe(true)
          expect(Either.isLeft(yield* Effect.either(repo.markSucceeded(stale, "d".repeat(64), { locked: job })))).toBe(
            true
          )
          expect(yield* terminalEventsOf(job.id)).toHaveLength(0)
          yield* repo.markSucceeded(leaseFor(job), "d".repeat(64), { locked: job })
          expect(Either.isLeft(yield* Effect.either(repo.markFailed(byLease(leaseFor(job)), failure)))).toBe(true)
          expect(Either.isLeft(yield* Effect.either(repo.requestCancel(job.id)))).toBe(true)
          expect((yield* theTerminalEvent(job.id)).event.eventType).toBe("ai.job.succeeded")
        }))
    })
  })
