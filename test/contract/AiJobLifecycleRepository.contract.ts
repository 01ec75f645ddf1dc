import { describe, expect, layer } from "@effect/vitest"
import { Clock, Duration, Effect, Either, Layer, Option } from "effect"
import type { AiJob, JobLease } from "../../src/domain/AiJob.js"
import { byExpiredLock, byLease, leaseOf } from "../../src/domain/AiJob.js"
import { newId } from "../../src/domain/Ids.js"
import { LockLost } from "../../src/domain/LifecycleErrors.js"
import { PersistenceError } from "../../src/domain/PersistenceError.js"
import { AiJobLifecycleRepository } from "../../src/services/AiJobLifecycleRepository.js"
import { AiJobService, makeAiJobService } from "../../src/services/AiJobService.js"
import { CredentialRepository } from "../../src/services/CredentialRepository.js"
import { JobDefinitionRegistry } from "../../src/services/JobDefinitionRegistry.js"
import { OutboxRepository } from "../../src/services/outbox/OutboxRepository.js"
import { OutboxSignal } from "../../src/services/outbox/OutboxSignal.js"
import { Quotas } from "../../src/services/Quotas.js"
import { SnapshotBuilder } from "../../src/services/SnapshotBuilder.js"
import { SnapshotRepository } from "../../src/services/SnapshotRepository.js"
import { UnitOfWork } from "../../src/services/UnitOfWork.js"

export type ContractServices =
  | AiJobLifecycleRepository
  | OutboxRepository
  | SnapshotRepository
  | UnitOfWork
  | AiJobService
  | JobDefinitionRegistry
  | SnapshotBuilder
  | OutboxSignal
  | Quotas
  | CredentialRepository

export interface RepositoryHarness {
  readonly name: string
  readonly layer: Layer.Layer<ContractServices, unknown>
  /** Lets the store's clock move on: TestClock in memory, real time against MySQL. */
  readonly advance: (millis: number) => Effect.Effect<void>
  /**
   * Run on the live clock: against MySQL the database's clock rules leases, and a library's own
   * sleeps (a deadlock retry's backoff, say) must not wait on a TestClock nobody moves.
   */
  readonly liveClock: boolean
  /** A lock TTL short enough to outlive in a test, long enough not to lapse by itself. */
  readonly lockTtlMs: number
}

const failure = {
  errorCode: "PROVIDER_UNAVAILABLE",
  publicErrorMessage: "unavailable",
  internalErrorMessage: "503 from x"
}

/** One job per test, under its own user, so tests sharing a store never see each other. */
const freshJob = Effect.gen(function*() {
  const service = yield* AiJobService
  const userId = `user-${yield* newId}`
  const { job } = yield* service.createJob({
    userId,
    jobType: "synthetic_echo",
    targetType: "test",
    targetId: "t-1",
    input: { message: "hello" }
  })
  return job
})

const reload = (jobId: string) =>
  Effect.flatMap(AiJobLifecycleRepository, (repo) => repo.findById(jobId)).pipe(Effect.map(Option.getOrThrow))

const leaseFor = (job: AiJob): JobLease => {
  const lease = leaseOf(job)
  if (lease === undefined) throw new Error(`job ${job.id} is not running`)
  return lease
}

/** Runs `attempt`, expects it to fail with `tag`, and checks the row did not change at all. */
const refusedWithoutChange = <A, E extends { readonly _tag: string }, R>(
  jobId: string,
  tag: string,
  attempt: Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const before = yield* reload(jobId)
    const result = yield* Effect.either(attempt)
    expect(Either.isLeft(result) ? result.left._tag : "succeeded").toBe(tag)
    const after = yield* reload(jobId)
    expect(after).toStrictEqual(before)
  })

/**
 * One lease's beat, as the lease keeper makes it for each lease it holds: `LockLost` when the
 * lease is gone, otherwise whether a cancel was requested.
 */
const beatOne = (lease: JobLease, lockTtlMs: number, progress = 0) =>
  Effect.flatMap(
    AiJobLifecycleRepository,
    (repo) => repo.extendLocks([{ lease, progress, reportCancel: true }], Duration.millis(lockTtlMs))
  ).pipe(
    Effect.flatMap(([beat]) =>
      beat === "Lost"
        ? Effect.fail(new LockLost({ ...lease }))
        : Effect.succeed({ cancelRequested: beat === "CancelRequested" })
    )
  )

export const lifecycleRepositoryContract = (harness: RepositoryHarness) =>
  describe(`AiJobLifecycleRepository contract (${harness.name})`, () => {
    const ttl = harness.lockTtlMs

    layer(harness.layer, { timeout: 60_000, excludeTestServices: harness.liveClock })((it) => {
      it.effect("creates a queued job with its legacy status, snapshot and outbox event", () =>
        Effect.gen(function*() {
          const job = yield* freshJob
          expect(job.lifecycleStatus).toBe("queued")
          expect(job.status).toBe("pending")
          expect(job.attemptCount).toBe(0)
          expect(job.maxAttempts).toBe(2)
          expect(job.input).toStrictEqual({ message: "hello" })
          const snapshot = yield* Effect.flatMap(SnapshotRepository, (repo) => repo.findByJobId(job.id))
          expect(Option.getOrThrow(snapshot).content).toStrictEqual({ message: "hello" })
        }))

      it.effect("queued → running by lockJob, then running → succeeded by the lease holder", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const job = yield* freshJob
          const running = yield* repo.lockJob(job.id, "worker-a", Duration.millis(ttl))
          expect(running.lifecycleStatus).toBe("running")
          expect(running.status).toBe("processing")
          expect(running.lockedBy).toBe("worker-a")
          expect(running.attemptCount).toBe(1)
          expect(running.startedAt).not.toBeNull()
          const done = yield* repo.markSucceeded(leaseFor(running), "a".repeat(64), { locked: running })
          expect(done.lifecycleStatus).toBe("succeeded")
          expect(done.status).toBe("completed")
          expect(done.progress).toBe(100)
          expect(done.outputHash).toBe("a".repeat(64))
          expect(done.finishedAt).not.toBeNull()
        }))

      it.effect("lockQueued locks a queued job as lockJob does and answers exactly the stored row and its snapshot", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const job = yield* freshJob
          const locked = Option.getOrThrow(
            (yield* repo.lockQueued([{ jobId: job.id, jobType: job.jobType }], "worker-a", Duration.millis(ttl), 10))[
              0
            ]!
          )
          expect(locked.job.lifecycleStatus).toBe("running")
          expect(locked.job.status).toBe("processing")
          expect(locked.job.lockedBy).toBe("worker-a")
          expect([locked.job.attemptCount, locked.job.leaseNo, locked.job.progress]).toEqual([1, 1, 10])
          expect(locked.job.startedAt).not.toBeNull()
          expect(locked.job.lockUntil).not.toBeNull()
          expect(yield* reload(job.id)).toStrictEqual(locked.job)
          const snapshot = yield* Effect.flatMap(SnapshotRepository, (snapshots) => snapshots.findByJobId(job.id))
          expect(locked.snapshot).toStrictEqual(snapshot)
          expect(Option.getOrThrow(locked.snapshot).content).toStrictEqual({ message: "hello" })
          // The lease it answers is the one the row holds: it can write.
          const done = yield* repo.markSucceeded(leaseFor(locked.job), "f".repeat(64), { locked: locked.job })
          expect(done.lifecycleStatus).toBe("succeeded")
        }))

      it.effect("lockQueued writes nothing and answers none for a running job, a job of another type, or no job", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const job = yield* freshJob
          const queued = yield* reload(job.id)
          expect(yield* repo.lockQueued([{ jobId: job.id, jobType: "another_type" }], "worker-a", Duration.millis(ttl)))
            .toEqual([
              Option.none()
            ])
          expect(yield* reload(job.id)).toStrictEqual(queued)
          const first = Option.getOrThrow(
            (yield* repo.lockQueued([{ jobId: job.id, jobType: job.jobType }], "worker-a", Duration.millis(ttl)))[0]!
          )
          expect(yield* repo.lockQueued([{ jobId: job.id, jobType: job.jobType }], "worker-b", Duration.millis(ttl)))
            .toEqual([
              Option.none()
            ])
          expect(yield* reload(job.id)).toStrictEqual(first.job)
          expect(
            yield* repo.lockQueued(
              [{ jobId: `missing-${yield* newId}`, jobType: job.jobType }],
              "worker-a",
              Duration.millis(ttl)
            )
          )
            .toEqual([Option.none()])
        }))

      it.effect("lockQueued locks a group in one go: each queued job of its type once, in the order asked, and nothing else", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const [a, b, c, held, elsewhere] = yield* Effect.all([freshJob, freshJob, freshJob, freshJob, freshJob])
          // Already this worker's (an earlier lease) and another worker's: neither is locked again.
          const heldBefore = yield* repo.lockJob(held!.id, "worker-g", Duration.millis(ttl))
          const elsewhereBefore = yield* repo.lockJob(elsewhere!.id, "worker-h", Duration.millis(ttl))
          const missing = `missing-${yield* newId}`
          const answers = yield* repo.lockQueued(
            [
              { jobId: c!.id, jobType: c!.jobType },
              { jobId: held!.id, jobType: held!.jobType },
              { jobId: a!.id, jobType: a!.jobType },
              { jobId: b!.id, jobType: "another_type" },
              { jobId: missing, jobType: a!.jobType },
              { jobId: a!.id, jobType: a!.jobType },
              { jobId: elsewhere!.id, jobType: elsewhere!.jobType }
            ],
            "worker-g",
            Duration.millis(ttl),
            10
          )
          expect(answers.map(Option.isSome)).toEqual([true, false, true, false, false, false, false])
          for (const [index, job] of [[0, c!], [2, a!]] as const) {
            const locked = Option.getOrThrow(answers[index]!)
            expect(locked.job.id).toBe(job.id)
            expect([locked.job.lifecycleStatus, locked.job.status, locked.job.lockedBy]).toEqual([
              "running",
              "processing",
              "worker-g"
            ])
            expect([locked.job.attemptCount, locked.job.leaseNo, locked.job.progress]).toEqual([1, 1, 10])
            expect(locked.job.lockUntil!.getTime() - locked.job.lockedAt!.getTime()).toBe(ttl)
            // Exactly the stored row, and its snapshot.
            expect(yield* reload(job.id)).toStrictEqual(locked.job)
            expect(locked.snapshot).toStrictEqual(
              yield* Effect.flatMap(SnapshotRepository, (snapshots) => snapshots.findByJobId(job.id))
            )
            // Its lease is the row's: it can write.
            const done = yield* repo.markSucceeded(leaseFor(locked.job), "9".repeat(64), { locked: locked.job })
            expect(done).toStrictEqual(yield* reload(job.id))
          }
          expect((yield* reload(b!.id)).lifecycleStatus).toBe("queued")
          expect(yield* reload(held!.id)).toStrictEqual(heldBefore)
          expect(yield* reload(elsewhere!.id)).toStrictEqual(elsewhereBefore)
        }))

      it.effect("createJob and markSucceeded(…, locked) answer exactly the row they stored, without reading it back", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const job = yield* freshJob
          expect(yield* reload(job.id)).toStrictEqual(job)
          const running = yield* repo.lockJob(job.id, "worker-a", Duration.millis(ttl))
          const done = yield* repo.markSucceeded(leaseFor(running), "e".repeat(64), { locked: running })
          expect(done.lifecycleStatus).toBe("succeeded")
          expect(yield* reload(job.id)).toStrictEqual(done)
        }))

      it.effect("markSucceeded with the locked job still refuses a lease that was taken over", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const job = yield* freshJob
          const first = yield* repo.lockJob(job.id, "worker-a", Duration.millis(ttl))
          yield* harness.advance(ttl * 2)
          yield* repo.takeOver(job.id, "worker-b", Duration.millis(ttl))
          yield* refusedWithoutChange(
            job.id,
            "LockLost",
            repo.markSucceeded(leaseFor(first), "zombie", { locked: first })
          )
        }))

      it.effect("running → failed records the error", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const running = yield* repo.lockJob((yield* freshJob).id, "worker-a", Duration.millis(ttl))
          const failed = yield* repo.markFailed(byLease(leaseFor(running)), failure)
          expect(failed.lifecycleStatus).toBe("failed")
          expect(failed.status).toBe("failed")
          expect(failed.errorCode).toBe("PROVIDER_UNAVAILABLE")
          expect(failed.publicErrorMessage).toBe("unavailable")
          expect(failed.internalErrorMessage).toBe("503 from x")
        }))

      it.effect("queued → cancelled at once by requestCancel", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const cancelled = yield* repo.requestCancel((yield* freshJob).id)
          expect(cancelled.lifecycleStatus).toBe("cancelled")
          expect(cancelled.status).toBe("cancelled")
          expect(cancelled.cancelRequestedAt).not.toBeNull()
          expect(cancelled.errorCode).toBe("CANCELLED")
        }))

      it.effect("running → cancelled only after a cancel request, seen by the heartbeat", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const running = yield* repo.lockJob((yield* freshJob).id, "worker-a", Duration.millis(ttl))
          const lease = leaseFor(running)
          yield* refusedWithoutChange(running.id, "IllegalTransition", repo.markCancelled(byLease(lease)))
          const requested = yield* repo.requestCancel(running.id)
          expect(requested.lifecycleStatus).toBe("running")
          expect(requested.cancelRequestedAt).not.toBeNull()
          const heartbeat = yield* beatOne(lease, ttl)
          expect(heartbeat.cancelRequested).toBe(true)
          const cancelled = yield* repo.markCancelled(byLease(lease))
          expect(cancelled.lifecycleStatus).toBe("cancelled")
        }))

      it.effect("a cancellable job's success is refused once a cancel was requested; one that ignores cancels succeeds", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const running = yield* repo.lockJob((yield* freshJob).id, "worker-a", Duration.millis(ttl))
          const lease = leaseFor(running)
          yield* repo.requestCancel(running.id)
          const honourCancel = { honourCancel: true }
          yield* refusedWithoutChange(
            running.id,
            "CancelRequestedBeforeSuccess",
            repo.markSucceeded(lease, "e".repeat(64), { ...honourCancel, locked: running })
          )
          const cancelled = yield* repo.markCancelled(byLease(lease))
          expect([cancelled.lifecycleStatus, cancelled.outputHash]).toStrictEqual(["cancelled", null])
          // The lease comes first: another owner's refusal is still a lost lock.
          const other = yield* repo.lockJob((yield* freshJob).id, "worker-b", Duration.millis(ttl))
          yield* repo.requestCancel(other.id)
          yield* refusedWithoutChange(
            other.id,
            "LockLost",
            repo.markSucceeded({ ...leaseFor(other), workerId: "worker-z" }, "f", { ...honourCancel, locked: other })
          )
          const ignoring = yield* repo.markSucceeded(leaseFor(other), "f".repeat(64), {
            locked: other,
            honourCancel: false
          })
          expect(ignoring.lifecycleStatus).toBe("succeeded")
        }))

      it.effect("a cancel racing a cancellable job's success: exactly one of them wins, and its answer says which", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          for (let round = 0; round < 40; round++) {
            const running = yield* repo.lockJob((yield* freshJob).id, "worker-a", Duration.millis(ttl * 100))
            const [cancel, success] = yield* Effect.all(
              [
                Effect.either(repo.requestCancel(running.id)),
                Effect.zipRight(
                  Effect.sleep(`${round % 3} millis`),
                  Effect.either(
                    repo.markSucceeded(leaseFor(running), "d".repeat(64), { locked: running, honourCancel: true })
                  )
                )
              ],
              { concurrency: "unbounded" }
            )
            const row = yield* reload(running.id)
            expect({
              round,
              cancelAccepted: Either.isRight(cancel),
              succeeded: Either.isRight(success),
              refusal: Either.isLeft(success) ? success.left._tag : null
            }).toStrictEqual({
              round,
              cancelAccepted: row.lifecycleStatus === "running",
              succeeded: row.lifecycleStatus === "succeeded",
              refusal: row.lifecycleStatus === "running" ? "CancelRequestedBeforeSuccess" : null
            })
          }
        }).pipe(Effect.withClock(Clock.make())))

      it.effect("illegal transitions fail with a typed error and leave the row unchanged", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const queued = yield* freshJob
          const notALease = { jobId: queued.id, workerId: "worker-a", attempt: 0, leaseNo: 0 }
          // queued → succeeded / failed / cancelled-by-worker: a job must be locked first.
          yield* refusedWithoutChange(
            queued.id,
            "IllegalTransition",
            repo.markSucceeded(notALease, "h", { locked: queued })
          )
          yield* refusedWithoutChange(queued.id, "IllegalTransition", repo.markFailed(byLease(notALease), failure))
          yield* refusedWithoutChange(queued.id, "IllegalTransition", repo.markCancelled(byLease(notALease)))

          // Terminal states never change.
          const succeeded = yield* repo.lockJob((yield* freshJob).id, "worker-a", Duration.millis(ttl)).pipe(
            Effect.flatMap((job) => repo.markSucceeded(leaseFor(job), "h", { locked: job }))
          )
          const lastLease = { jobId: succeeded.id, workerId: "worker-a", attempt: 1, leaseNo: 1 }
          yield* refusedWithoutChange(
            succeeded.id,
            "IllegalTransition",
            repo.lockJob(succeeded.id, "worker-b", Duration.millis(ttl))
          )
          yield* refusedWithoutChange(
            succeeded.id,
            "IllegalTransition",
            repo.takeOver(succeeded.id, "worker-b", Duration.millis(ttl))
          )
          yield* refusedWithoutChange(
            succeeded.id,
            "IllegalTransition",
            repo.markSucceeded(lastLease, "h2", { locked: succeeded })
          )
          yield* refusedWithoutChange(succeeded.id, "IllegalTransition", repo.markFailed(byLease(lastLease), failure))
          yield* refusedWithoutChange(succeeded.id, "IllegalTransition", repo.markCancelled(byLease(lastLease)))
          yield* refusedWithoutChange(succeeded.id, "JobNotCancellable", repo.requestCancel(succeeded.id))
          yield* refusedWithoutChange(succeeded.id, "LockLost", beatOne(lastLease, ttl))

          const failed = yield* repo.lockJob((yield* freshJob).id, "worker-a", Duration.millis(ttl)).pipe(
            Effect.flatMap((job) => repo.markFailed(byLease(leaseFor(job)), failure))
          )
          const failedLease = { jobId: failed.id, workerId: "worker-a", attempt: 1, leaseNo: 1 }
          yield* refusedWithoutChange(
            failed.id,
            "IllegalTransition",
            repo.lockJob(failed.id, "worker-b", Duration.millis(ttl))
          )
          yield* refusedWithoutChange(
            failed.id,
            "IllegalTransition",
            repo.markSucceeded(failedLease, "h", { locked: failed })
          )
          yield* refusedWithoutChange(failed.id, "IllegalTransition", repo.markCancelled(byLease(failedLease)))
          yield* refusedWithoutChange(failed.id, "JobNotCancellable", repo.requestCancel(failed.id))

          const cancelled = yield* repo.requestCancel((yield* freshJob).id)
          const cancelledLease = { jobId: cancelled.id, workerId: "worker-a", attempt: 0, leaseNo: 0 }
          yield* refusedWithoutChange(
            cancelled.id,
            "IllegalTransition",
            repo.lockJob(cancelled.id, "worker-b", Duration.millis(ttl))
          )
          yield* refusedWithoutChange(
            cancelled.id,
            "IllegalTransition",
            repo.markSucceeded(cancelledLease, "h", { locked: cancelled })
          )
          yield* refusedWithoutChange(
            cancelled.id,
            "IllegalTransition",
            repo.markFailed(byLease(cancelledLease), failure)
          )
          yield* refusedWithoutChange(cancelled.id, "JobAlreadyCancelled", repo.requestCancel(cancelled.id))

          // running → queued has no method at all: the repository cannot express it.
          const missing = yield* Effect.either(repo.lockJob("no-such-job", "worker-a", Duration.millis(ttl)))
          expect(Either.isLeft(missing) && missing.left._tag).toBe("JobNotFound")
        }))

      it.effect("20 concurrent lockJob on one queued job: exactly one wins", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const job = yield* freshJob
          const results = yield* Effect.forEach(
            Array.from({ length: 20 }, (_, i) => `worker-${i}`),
            (workerId) => Effect.either(repo.lockJob(job.id, workerId, Duration.millis(ttl))),
            { concurrency: "unbounded" }
          )
          const winners = results.filter(Either.isRight)
          const losers = results.filter(Either.isLeft).map((result) => result.left._tag)
          expect(winners).toHaveLength(1)
          expect(losers).toStrictEqual(Array.from({ length: 19 }, () => "JobLockConflict"))
          const row = yield* reload(job.id)
          expect(row.attemptCount).toBe(1)
          expect(row.lockedBy).toBe(Either.isRight(winners[0]!) ? winners[0].right.lockedBy : "")
        }))

      it.effect("a worker whose lock was taken over cannot extend, succeed or fail the job", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const job = yield* freshJob
          const first = yield* repo.lockJob(job.id, "worker-a", Duration.millis(ttl))
          const zombie = leaseFor(first)
          // Not expired yet: nobody may take it.
          yield* refusedWithoutChange(
            job.id,
            "JobLockConflict",
            repo.takeOver(job.id, "worker-b", Duration.millis(ttl))
          )
          yield* harness.advance(ttl * 2)
          expect((yield* repo.findExpiredLocks(Duration.millis(0), 1000)).map((row) => row.id)).toContain(job.id)
          const taken = yield* repo.takeOver(job.id, "worker-b", Duration.millis(ttl))
          expect(taken.lifecycleStatus).toBe("running")
          expect(taken.lockedBy).toBe("worker-b")
          expect(taken.attemptCount).toBe(2)
          yield* refusedWithoutChange(job.id, "LockLost", beatOne(zombie, ttl))
          yield* refusedWithoutChange(job.id, "LockLost", beatOne(zombie, ttl, 50))
          yield* refusedWithoutChange(job.id, "LockLost", repo.markSucceeded(zombie, "zombie", { locked: job }))
          yield* refusedWithoutChange(job.id, "LockLost", repo.markFailed(byLease(zombie), failure))
          const done = yield* repo.markSucceeded(leaseFor(taken), "b".repeat(64), { locked: taken })
          expect(done.lifecycleStatus).toBe("succeeded")
          expect(done.outputHash).toBe("b".repeat(64))
        }))

      it.effect("a takeover past the last attempt is refused; the reaper's fence fails the job", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const job = yield* freshJob
          yield* repo.lockJob(job.id, "worker-a", Duration.millis(ttl))
          yield* harness.advance(ttl * 2)
          const second = yield* repo.takeOver(job.id, "worker-b", Duration.millis(ttl))
          expect(second.attemptCount).toBe(second.maxAttempts)
          yield* harness.advance(ttl * 2)
          yield* refusedWithoutChange(
            job.id,
            "AttemptsExhausted",
            repo.takeOver(job.id, "worker-c", Duration.millis(ttl))
          )
          const expired = (yield* repo.findExpiredLocks(Duration.millis(ttl / 2), 1000)).find((row) =>
            row.id === job.id
          )
          expect(expired).toBeDefined()
          const failed = yield* repo.markFailed(byExpiredLock(expired!, Duration.millis(ttl / 2)), {
            errorCode: "INTERNAL_WORKER_LOST",
            publicErrorMessage: "lost",
            internalErrorMessage: "lock expired"
          })
          expect(failed.lifecycleStatus).toBe("failed")
          expect(failed.errorCode).toBe("INTERNAL_WORKER_LOST")
        }))

      it.effect("the reaper's fence refuses a job whose worker came back and extended its lock", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const running = yield* repo.lockJob((yield* freshJob).id, "worker-a", Duration.millis(ttl))
          yield* harness.advance(ttl * 2)
          const seen = (yield* repo.findExpiredLocks(Duration.millis(0), 1000)).find((row) => row.id === running.id)
          expect(seen).toBeDefined()
          yield* beatOne(leaseFor(running), ttl * 10)
          yield* refusedWithoutChange(
            running.id,
            "LockLost",
            repo.markFailed(byExpiredLock(seen!, Duration.millis(0)), failure)
          )
          expect((yield* repo.findExpiredLocks(Duration.millis(0), 1000)).map((row) => row.id)).not.toContain(
            running.id
          )
        }))

      it.effect("a released lock can be taken over at once", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const running = yield* repo.lockJob((yield* freshJob).id, "worker-a", Duration.millis(ttl * 100))
          yield* repo.releaseLock(leaseFor(running))
          const taken = yield* repo.takeOver(running.id, "worker-b", Duration.millis(ttl))
          expect(taken.lockedBy).toBe("worker-b")
        }))

      it.effect("a cancel racing the worker's finish: refused exactly when it wrote nothing", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          for (let round = 0; round < 60; round++) {
            const running = yield* repo.lockJob((yield* freshJob).id, "worker-a", Duration.millis(ttl * 100))
            const [cancel] = yield* Effect.all(
              [
                Effect.either(repo.requestCancel(running.id)),
                Effect.zipRight(
                  Effect.sleep(`${round % 3} millis`),
                  Effect.either(repo.markSucceeded(leaseFor(running), "d".repeat(64), { locked: running }))
                )
              ],
              { concurrency: "unbounded" }
            )
            const row = yield* reload(running.id)
            expect({ round, accepted: Either.isRight(cancel), stamped: row.cancelRequestedAt !== null })
              .toStrictEqual({
                round,
                accepted: row.cancelRequestedAt !== null,
                stamped: row.cancelRequestedAt !== null
              })
          }
        }).pipe(Effect.withClock(Clock.make())))

      it.effect("a hand-off costs no attempt, however often, and fences the worker that gave the job back", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const locked = yield* repo.lockJob((yield* freshJob).id, "worker-0", Duration.millis(ttl * 100))
          expect(locked.attemptCount).toBe(1)
          let lease = leaseFor(locked)
          let held = locked
          // More hand-offs than the job has attempts.
          for (let handOff = 1; handOff <= locked.maxAttempts + 2; handOff++) {
            const previous = lease
            yield* repo.releaseLock(previous)
            const released = yield* reload(locked.id)
            expect(released.lifecycleStatus).toBe("running")
            expect(released.lockedBy).toBeNull()
            // Nobody holds it: the reaper sees it at once.
            expect((yield* repo.findExpiredLocks(Duration.millis(0), 1000)).map((row) => row.id)).toContain(locked.id)
            const taken = yield* repo.takeOver(locked.id, `worker-${handOff}`, Duration.millis(ttl * 100))
            expect(taken.attemptCount).toBe(1)
            expect(taken.leaseNo).toBe(previous.leaseNo + 1)
            lease = leaseFor(taken)
            held = taken
            // The worker that gave the job back can no longer write to it.
            yield* refusedWithoutChange(locked.id, "LockLost", beatOne(previous, ttl))
            yield* refusedWithoutChange(locked.id, "LockLost", repo.markSucceeded(previous, "old", { locked }))
            yield* refusedWithoutChange(locked.id, "LockLost", repo.markFailed(byLease(previous), failure))
            yield* refusedWithoutChange(locked.id, "LockLost", repo.releaseLock(previous))
          }
          const done = yield* repo.markSucceeded(lease, "c".repeat(64), { locked: held })
          expect(done.lifecycleStatus).toBe("succeeded")
          expect(done.attemptCount).toBe(1)
        }))

      it.effect("a takeover of an expired lock after a hand-off costs an attempt; one after the last attempt is refused", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const locked = yield* repo.lockJob((yield* freshJob).id, "worker-a", Duration.millis(ttl))
          yield* harness.advance(ttl * 2)
          // worker-a crashed: the takeover is the last attempt.
          const second = yield* repo.takeOver(locked.id, "worker-b", Duration.millis(ttl))
          expect(second.attemptCount).toBe(2)
          expect(second.attemptCount).toBe(second.maxAttempts)
          // worker-b hands off: the job can still be taken, in the same attempt.
          yield* repo.releaseLock(leaseFor(second))
          const third = yield* repo.takeOver(locked.id, "worker-c", Duration.millis(ttl))
          expect(third.attemptCount).toBe(2)
          // worker-c crashes: no attempt is left.
          yield* harness.advance(ttl * 2)
          yield* refusedWithoutChange(
            locked.id,
            "AttemptsExhausted",
            repo.takeOver(locked.id, "worker-d", Duration.millis(ttl))
          )
        }))

      it.effect("the reaper's fence refuses a job handed off after the reaper saw it", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const running = yield* repo.lockJob((yield* freshJob).id, "worker-a", Duration.millis(ttl))
          yield* harness.advance(ttl * 2)
          const seen = (yield* repo.findExpiredLocks(Duration.millis(0), 1000)).find((row) => row.id === running.id)
          expect(seen).toBeDefined()
          // The worker was only slow: it gives the job back before the reaper acts.
          yield* repo.releaseLock(leaseFor(running))
          yield* refusedWithoutChange(
            running.id,
            "LockLost",
            repo.markFailed(byExpiredLock(seen!, Duration.millis(0)), failure)
          )
        }))

      it.effect("finds queued jobs nobody touched for long, and touching one is a compare-and-set", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const job = yield* freshJob
          expect((yield* repo.findStaleQueued(Duration.millis(ttl), 10_000)).map((row) => row.id)).not.toContain(job.id)
          yield* harness.advance(ttl * 2)
          const stale = (yield* repo.findStaleQueued(Duration.millis(ttl), 10_000)).find((row) => row.id === job.id)
          expect(stale).toBeDefined()
          expect(yield* repo.touchQueued(stale!)).toBe(true)
          // A second reaper that saw the same row loses.
          expect(yield* repo.touchQueued(stale!)).toBe(false)
          expect((yield* repo.findStaleQueued(Duration.millis(ttl), 10_000)).map((row) => row.id)).not.toContain(job.id)
          const locked = yield* repo.lockJob(job.id, "worker-a", Duration.millis(ttl))
          yield* harness.advance(ttl * 2)
          expect(yield* repo.touchQueued(locked)).toBe(false)
        }))

      it.effect("one beat extends every held lease, raises progress, and names the leases lost and the cancels requested", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          expect(yield* repo.extendLocks([], Duration.millis(ttl))).toStrictEqual([])
          const lock = (progress?: number) =>
            Effect.flatMap(freshJob, (job) => repo.lockJob(job.id, "worker-a", Duration.millis(ttl), progress))
          const steady = yield* lock(30)
          const cancelled = yield* lock()
          const ignoring = yield* lock()
          const takenOver = yield* lock()
          const finished = yield* lock()
          yield* repo.requestCancel(cancelled.id)
          yield* repo.requestCancel(ignoring.id)
          yield* repo.markSucceeded(leaseFor(finished), "f".repeat(64), { locked: finished })
          yield* harness.advance(ttl * 2)
          const rescued = yield* repo.takeOver(takenOver.id, "worker-b", Duration.millis(ttl))
          const before = yield* Effect.forEach([takenOver.id, finished.id], reload)

          const beats = yield* repo.extendLocks([
            { lease: leaseFor(steady), progress: 20, reportCancel: true },
            { lease: leaseFor(cancelled), progress: 45, reportCancel: true },
            { lease: leaseFor(ignoring), progress: 50, reportCancel: false },
            { lease: leaseFor(takenOver), progress: 60, reportCancel: true },
            { lease: leaseFor(finished), progress: 70, reportCancel: true }
          ], Duration.millis(ttl))
          expect(beats).toStrictEqual(["Extended", "CancelRequested", "Extended", "Lost", "Lost"])
          // Held leases end a TTL from the beat (past the first lock's end); progress never goes down.
          for (const [job, progress] of [[steady, 30], [cancelled, 45], [ignoring, 50]] as const) {
            const row = yield* reload(job.id)
            expect(row.lockUntil!.getTime()).toBeGreaterThan(job.lockUntil!.getTime())
            expect(row.progress).toBe(progress)
          }
          // The lost leases' rows are untouched: the new owner's lease and the finished job stay as they were.
          expect(yield* Effect.forEach([takenOver.id, finished.id], reload)).toStrictEqual(before)
          expect((yield* reload(takenOver.id)).lockedBy).toBe(rescued.lockedBy)

          // A beat where every lease is held and nobody asked to cancel.
          const again = yield* repo.extendLocks([
            { lease: leaseFor(steady), progress: 35, reportCancel: true },
            { lease: leaseFor(cancelled), progress: 45, reportCancel: false }
          ], Duration.millis(ttl))
          expect(again).toStrictEqual(["Extended", "Extended"])
          expect((yield* reload(steady.id)).progress).toBe(35)
        }))

      it.effect("progress moves only under the lease", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const running = yield* repo.lockJob((yield* freshJob).id, "worker-a", Duration.millis(ttl))
          yield* beatOne(leaseFor(running), ttl, 40)
          expect((yield* reload(running.id)).progress).toBe(40)
        }))

      it.effect("finds jobs by status and lists a user's jobs newest first with a cursor", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const service = yield* AiJobService
          const userId = `lister-${yield* newId}`
          const created: Array<AiJob> = []
          for (let i = 0; i < 5; i++) {
            const { job } = yield* service.createJob({
              userId,
              jobType: "synthetic_echo",
              targetType: "test",
              targetId: `t-${i}`,
              input: { message: `m${i}` }
            })
            created.push(job)
            yield* harness.advance(5)
          }
          yield* repo.lockJob(created[0]!.id, "worker-a", Duration.millis(ttl))
          const firstPage = yield* repo.list({ userId }, { limit: 3 })
          expect(firstPage.map((job) => job.id)).toStrictEqual(created.slice(2).reverse().map((job) => job.id))
          const last = firstPage[2]!
          const secondPage = yield* repo.list({ userId }, {
            limit: 3,
            after: { createdAt: last.createdAt, id: last.id }
          })
          expect(secondPage.map((job) => job.id)).toStrictEqual([created[1]!.id, created[0]!.id])
          const running = yield* repo.list({ userId, statuses: ["running"] }, { limit: 10 })
          expect(running.map((job) => job.id)).toStrictEqual([created[0]!.id])
          expect(yield* repo.countActive(userId)).toBe(5)
          expect(yield* repo.countCreatedSince(userId, created[3]!.createdAt)).toBe(2)
          const queued = yield* repo.findByLifecycleStatus(["queued"], { queueName: "ai-interactive", limit: 10_000 })
          expect(queued.filter((job) => job.userId === userId)).toHaveLength(4)
        }))

      it.effect("50 concurrent creates with one idempotency key: one job, one outbox event", () =>
        Effect.gen(function*() {
          const service = yield* AiJobService
          const outbox = yield* OutboxRepository
          const userId = `idem-${yield* newId}`
          const results = yield* Effect.forEach(
            Array.from({ length: 50 }, () => 0),
            () =>
              service.createJob({
                userId,
                jobType: "synthetic_echo",
                targetType: "test",
                targetId: "same",
                idempotencyKey: "key-1",
                input: { message: "once" }
              }),
            { concurrency: "unbounded" }
          )
          const ids = new Set(results.map((result) => result.job.id))
          expect(ids.size).toBe(1)
          expect(results.filter((result) => result.created)).toHaveLength(1)
          const repo = yield* AiJobLifecycleRepository
          expect(yield* repo.list({ userId }, { limit: 100 })).toHaveLength(1)
          const [jobId] = [...ids]
          const event = yield* outbox.createInTransaction({
            id: yield* newId,
            eventType: "ai.job.enqueue",
            aggregateType: "AiJob",
            aggregateId: jobId!,
            dedupeKey: `ai.job.enqueue:${jobId}`,
            payload: {},
            delay: Duration.zero
          })
          // The one event the create wrote holds the dedupe key: a second is a duplicate.
          expect(event.duplicate).toBe(true)
        }))

      it.effect("user ids and idempotency keys compare exactly: a trailing space is another user and another key", () =>
        Effect.gen(function*() {
          const service = yield* AiJobService
          const repo = yield* AiJobLifecycleRepository
          const victim = `victim-${yield* newId}`
          const padded = `${victim} `
          const request = {
            jobType: "synthetic_echo",
            targetType: "test",
            targetId: "t",
            idempotencyKey: "key-1",
            input: { message: "mine" }
          }
          const { job: victimJob } = yield* service.createJob({ ...request, userId: victim })

          expect(yield* repo.list({ userId: padded }, { limit: 10 })).toEqual([])
          expect(yield* repo.countActive(padded)).toBe(0)
          expect(Option.isNone(yield* repo.findByIdempotencyKey(padded, "synthetic_echo", "key-1"))).toBe(true)
          expect(Option.isNone(yield* repo.findByIdempotencyKey(victim, "synthetic_echo", "key-1 "))).toBe(true)

          // The padded user's own job under the same key is a new job, not the victim's.
          const padded1 = yield* service.createJob({ ...request, userId: padded })
          expect(padded1.created).toBe(true)
          expect(padded1.job.id).not.toBe(victimJob.id)
          expect(padded1.job.userId).toBe(padded)
          const spaced = yield* service.createJob({ ...request, userId: victim, idempotencyKey: "key-1 " })
          expect(spaced.created).toBe(true)
          expect(spaced.job.idempotencyKey).toBe("key-1 ")
          expect((yield* repo.list({ userId: padded }, { limit: 10 })).map((job) => job.id)).toEqual([padded1.job.id])
          expect(new Set((yield* repo.list({ userId: victim }, { limit: 10 })).map((job) => job.id))).toEqual(
            new Set([victimJob.id, spaced.job.id])
          )
        }))

      it.effect("an idempotency key reused with another input is refused; the same input returns the first job", () =>
        Effect.gen(function*() {
          const service = yield* AiJobService
          const repo = yield* AiJobLifecycleRepository
          const userId = `reuse-${yield* newId}`
          const request = {
            userId,
            jobType: "synthetic_echo",
            targetType: "test",
            targetId: "t",
            idempotencyKey: "key-1"
          }
          const first = yield* service.createJob({ ...request, input: { message: "first" } })
          expect(first.created).toBe(true)
          expect(first.job.requestHash).toMatch(/^[0-9a-f]{64}$/)

          const again = yield* service.createJob({ ...request, input: { message: "first" } })
          expect(again).toEqual({ job: first.job, created: false })

          const other = yield* Effect.either(service.createJob({ ...request, input: { message: "second" } }))
          expect(Either.isLeft(other) && other.left._tag).toBe("IdempotencyKeyReused")
          expect(Either.isLeft(other) && other.left._tag === "IdempotencyKeyReused" && other.left.jobId).toBe(
            first.job.id
          )
          expect((yield* repo.list({ userId }, { limit: 10 })).map((job) => job.id)).toEqual([first.job.id])

          // A job without a key stores no hash: there is nothing to bind.
          const unkeyed = yield* service.createJob({
            ...request,
            idempotencyKey: undefined,
            input: { message: "second" }
          })
          expect(unkeyed.job.requestHash).toBeNull()
        }))

      it.effect("concurrent creates with one key and two inputs: one job; the other input is refused", () =>
        Effect.gen(function*() {
          const service = yield* AiJobService
          const repo = yield* AiJobLifecycleRepository
          const userId = `race-${yield* newId}`
          const results = yield* Effect.forEach(
            Array.from({ length: 20 }, (_, i) => i),
            (i) =>
              Effect.either(service.createJob({
                userId,
                jobType: "synthetic_echo",
                targetType: "test",
                targetId: "same",
                idempotencyKey: "key-1",
                input: { message: i % 2 === 0 ? "even" : "odd" }
              })),
            { concurrency: "unbounded" }
          )
          const jobs = yield* repo.list({ userId }, { limit: 100 })
          expect(jobs).toHaveLength(1)
          const answered = results.filter(Either.isRight).map((result) => result.right.job.id)
          const refused = results.filter(Either.isLeft).map((result) => result.left._tag)
          expect(answered).toHaveLength(10)
          expect(new Set(answered)).toEqual(new Set([jobs[0]!.id]))
          expect(refused).toEqual(Array.from({ length: 10 }, () => "IdempotencyKeyReused"))
        }))

      it.effect("50 concurrent creates without a key make 50 jobs", () =>
        Effect.gen(function*() {
          const service = yield* AiJobService
          const repo = yield* AiJobLifecycleRepository
          const userId = `nokey-${yield* newId}`
          yield* Effect.forEach(
            Array.from({ length: 50 }, (_, i) => i),
            (i) =>
              service.createJob({
                userId,
                jobType: "synthetic_echo",
                targetType: "test",
                targetId: `${i}`,
                input: { message: "x" }
              }),
            { concurrency: "unbounded" }
          )
          expect(yield* repo.list({ userId }, { limit: 100 })).toHaveLength(50)
        }))

      it.effect("a failure inside the create transaction leaves no job and no snapshot", () =>
        Effect.gen(function*() {
          const realOutbox = yield* OutboxRepository
          let attemptedJobId = ""
          const failingOutbox = OutboxRepository.of({
            ...realOutbox,
            createInTransaction: (event) =>
              Effect.sync(() => {
                attemptedJobId = event.aggregateId
              }).pipe(
                Effect.zipRight(
                  Effect.fail(new PersistenceError({ operation: "outbox_event.create", message: "forced" }))
                )
              )
          })
          const service = yield* makeAiJobService.pipe(Effect.provideService(OutboxRepository, failingOutbox))
          const result = yield* Effect.either(
            service.createJob({
              userId: `atomic-${yield* newId}`,
              jobType: "synthetic_echo",
              targetType: "test",
              targetId: "t",
              input: { message: "x" }
            })
          )
          expect(Either.isLeft(result) && result.left._tag).toBe("PersistenceError")
          expect(attemptedJobId).not.toBe("")
          const repo = yield* AiJobLifecycleRepository
          const snapshots = yield* SnapshotRepository
          expect(Option.isNone(yield* repo.findById(attemptedJobId))).toBe(true)
          expect(Option.isNone(yield* snapshots.findByJobId(attemptedJobId))).toBe(true)
        }))

      it.effect("a retry records the job it retries, and the retried job finds its retries oldest first", () =>
        Effect.gen(function*() {
          const service = yield* AiJobService
          const repo = yield* AiJobLifecycleRepository
          const original = yield* freshJob
          const retryOf = (jobId: string) =>
            service.createJob({
              userId: original.userId,
              jobType: original.jobType,
              targetType: original.targetType,
              targetId: original.targetId,
              input: original.input,
              enforceQuotas: false,
              retryOf: jobId
            })
          const first = (yield* retryOf(original.id)).job
          yield* harness.advance(5)
          const second = (yield* retryOf(original.id)).job
          const ofTheRetry = (yield* retryOf(first.id)).job

          expect(original.retriedFromJobId).toBeNull()
          expect((yield* reload(first.id)).retriedFromJobId).toBe(original.id)
          expect((yield* reload(ofTheRetry.id)).retriedFromJobId).toBe(first.id)
          expect((yield* repo.findRetriesOf(original.id)).map((job) => job.id)).toStrictEqual([first.id, second.id])
          expect((yield* repo.findRetriesOf(first.id)).map((job) => job.id)).toStrictEqual([ofTheRetry.id])
          expect(yield* repo.findRetriesOf(second.id)).toStrictEqual([])
        }))

      it.effect("bad input is a typed error naming the field, and nothing is written", () =>
        Effect.gen(function*() {
          const service = yield* AiJobService
          const repo = yield* AiJobLifecycleRepository
          const userId = `bad-${yield* newId}`
          const result = yield* Effect.either(
            service.createJob({
              userId,
              jobType: "synthetic_echo",
              targetType: "t",
              targetId: "t",
              input: { message: 42 }
            })
          )
          expect(Either.isLeft(result) && result.left._tag).toBe("InvalidJobInput")
          if (Either.isLeft(result) && result.left._tag === "InvalidJobInput") {
            expect(result.left.problems.join(" ")).toContain("message")
          }
          const unknown = yield* Effect.either(
            service.createJob({ userId, jobType: "no_such_type", targetType: "t", targetId: "t", input: {} })
          )
          expect(Either.isLeft(unknown) && unknown.left._tag).toBe("UnknownJobType")
          expect(yield* repo.list({ userId }, { limit: 10 })).toHaveLength(0)
        }))
    })
  })
