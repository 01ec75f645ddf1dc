import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either, Layer, TestClock } from "effect"
import { QuotaLimitsConfig } from "../../../src/config/QuotaLimitsConfig.js"
import { type AiJob, byLease, type JobLease, leaseOf } from "../../../src/domain/AiJob.js"
import { newId } from "../../../src/domain/Ids.js"
import {
  type MemoryAiJobLifecycleRepositoryOptions,
  MemoryAiJobLifecycleRepositoryWith
} from "../../../src/layers/memory/MemoryAiJobLifecycleRepository.js"
import { MemoryCredentialRepository } from "../../../src/layers/memory/MemoryCredentialRepository.js"
import { MemoryDatabaseLive } from "../../../src/layers/memory/MemoryDatabase.js"
import { MemoryOutboxRepository } from "../../../src/layers/memory/MemoryOutboxRepository.js"
import { MemoryQuotas } from "../../../src/layers/memory/MemoryQuotas.js"
import { MemorySnapshotRepository } from "../../../src/layers/memory/MemorySnapshotRepository.js"
import { MemoryUnitOfWork } from "../../../src/layers/memory/MemoryUnitOfWork.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { jobCreation } from "../../support/foundationStack.js"

// The simulation's planted bug must break exactly the lease guard and nothing else; the same
// scenarios with the option left out are refused.
const stack = (options: MemoryAiJobLifecycleRepositoryOptions) =>
  jobCreation(
    MemoryQuotas.pipe(
      Layer.provideMerge(
        Layer.mergeAll(
          MemoryAiJobLifecycleRepositoryWith(options),
          MemoryOutboxRepository,
          MemorySnapshotRepository,
          MemoryUnitOfWork,
          MemoryCredentialRepository
        )
      ),
      Layer.provideMerge(Layer.merge(MemoryDatabaseLive, QuotaLimitsConfig.make({})))
    )
  ).pipe(Layer.orDie)

const ttl = 1_000

const freshJob = Effect.gen(function*() {
  const service = yield* AiJobService
  const { job } = yield* service.createJob({
    userId: `user-${yield* newId}`,
    jobType: "synthetic_echo",
    targetType: "test",
    targetId: "t-1",
    input: { message: "hello" }
  })
  return job
})

const leaseFor = (job: AiJob): JobLease => leaseOf(job)!

/** A job worker-a locked, then lost to worker-b after its lock expired: worker-a's lease is stale. */
const takenOver = Effect.gen(function*() {
  const repo = yield* AiJobLifecycleRepository
  const job = yield* freshJob
  const stale = leaseFor(yield* repo.lockJob(job.id, "worker-a", Duration.millis(ttl)))
  yield* TestClock.adjust(ttl * 2)
  const current = leaseFor(yield* repo.takeOver(job.id, "worker-b", Duration.millis(ttl)))
  return { job, stale, current }
})

const tagOf = <A, E extends { readonly _tag: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.either(effect), Either.match({ onLeft: (error) => error._tag, onRight: () => "done" }))

describe("MemoryAiJobLifecycleRepository with fencing disabled (the simulation's planted bug)", () => {
  for (const unfenced of [true, false]) {
    const options = unfenced ? { unsafeDisableFencingForSimulation: true } : {}
    const expected = (bug: string, guarded: string) => (unfenced ? bug : guarded)

    it.effect(`a stale lease beats, reports progress and succeeds (${unfenced ? "unfenced" : "fenced"})`, () =>
      Effect.gen(function*() {
        const repo = yield* AiJobLifecycleRepository
        const { job, stale } = yield* takenOver
        const beats = yield* repo.extendLocks(
          [{ lease: stale, progress: 40, reportCancel: true }],
          Duration.millis(ttl)
        )
        expect(beats).toStrictEqual([expected("Extended", "Lost")])
        expect(yield* tagOf(repo.releaseLock(stale))).toBe(expected("done", "LockLost"))
        expect(yield* tagOf(repo.markSucceeded(stale, "zombie", { locked: job }))).toBe(expected("done", "LockLost"))
        const row = yield* repo.findById(job.id)
        expect(row._tag === "Some" && row.value.lifecycleStatus).toBe(expected("succeeded", "running"))
      }).pipe(Effect.provide(stack(options))))

    it.effect(`a stale lease fails or cancels the job (${unfenced ? "unfenced" : "fenced"})`, () =>
      Effect.gen(function*() {
        const repo = yield* AiJobLifecycleRepository
        const failed = yield* takenOver
        const failure = {
          errorCode: "PROVIDER_UNAVAILABLE",
          publicErrorMessage: "unavailable",
          internalErrorMessage: "x"
        }
        expect(yield* tagOf(repo.markFailed(byLease(failed.stale), failure))).toBe(expected("done", "LockLost"))
        const cancelled = yield* takenOver
        yield* repo.requestCancel(cancelled.job.id)
        expect(yield* tagOf(repo.markCancelled(byLease(cancelled.stale)))).toBe(expected("done", "LockLost"))
      }).pipe(Effect.provide(stack(options))))

    it.effect(`a success that honours cancels ignores the request only when unfenced (${unfenced ? "unfenced" : "fenced"})`, () =>
      Effect.gen(function*() {
        const repo = yield* AiJobLifecycleRepository
        const running = yield* repo.lockJob((yield* freshJob).id, "worker-a", Duration.millis(ttl))
        yield* repo.requestCancel(running.id)
        const beats = yield* repo.extendLocks(
          [{ lease: leaseFor(running), progress: 0, reportCancel: true }],
          Duration.millis(ttl)
        )
        expect(beats).toStrictEqual(["CancelRequested"])
        expect(yield* tagOf(repo.markSucceeded(leaseFor(running), "h", { locked: running, honourCancel: true })))
          .toBe(expected("done", "CancelRequestedBeforeSuccess"))
      }).pipe(Effect.provide(stack(options))))

    it.effect(`a lease of a job that does not exist is still refused (${unfenced ? "unfenced" : "fenced"})`, () =>
      Effect.gen(function*() {
        const repo = yield* AiJobLifecycleRepository
        const running = yield* repo.lockJob((yield* freshJob).id, "worker-a", Duration.millis(ttl))
        const ghost = { ...leaseFor(running), jobId: `missing-${yield* newId}` }
        expect(yield* repo.extendLocks([{ lease: ghost, progress: 0, reportCancel: true }], Duration.millis(ttl)))
          .toStrictEqual([
            "Lost"
          ])
        expect(yield* tagOf(repo.markSucceeded(ghost, "h", { locked: running }))).toBe("JobNotFound")
        expect(
          yield* tagOf(
            repo.markFailed(byLease(ghost), { errorCode: "X", publicErrorMessage: "x", internalErrorMessage: "x" })
          )
        )
          .toBe("JobNotFound")
      }).pipe(Effect.provide(stack(options))))
  }
})
