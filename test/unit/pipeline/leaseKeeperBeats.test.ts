import { describe, expect, it } from "@effect/vitest"
import { DateTime, Deferred, Duration, Effect, Exit, Option, Scope, TestClock } from "effect"
import { leaseOf } from "../../../src/domain/AiJob.js"
import type { JobEvent } from "../../../src/domain/JobEvent.js"
import { PersistenceError } from "../../../src/domain/PersistenceError.js"
import { makeLeaseKeeper } from "../../../src/pipeline/LeaseKeeper.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { CancelSignal } from "../../../src/services/CancelSignal.js"
import { JobEvents } from "../../../src/services/JobEvents.js"
import { memoryEngineStack, settle } from "../../support/engineStack.js"
import { LogCapture, LogCaptureLayer } from "../../support/logCapture.js"

const heartbeatMs = 2_000
const lockTtlMs = 6_000

/** A queued job locked by `worker-1` (progress 5), and its lease. */
const lockedEcho = (message: string) =>
  Effect.gen(function*() {
    const jobs = yield* AiJobLifecycleRepository
    const { job } = yield* Effect.flatMap(AiJobService, (service) =>
      service.createJob({
        userId: "user-1",
        jobType: "synthetic_echo",
        targetType: "test",
        targetId: message,
        input: { message }
      }))
    const locked = yield* jobs.lockJob(job.id, "worker-1", Duration.millis(lockTtlMs), 5)
    return { job: locked, lease: leaseOf(locked)! }
  })

const jobNow = (jobId: string) =>
  Effect.flatMap(AiJobLifecycleRepository, (jobs) => Effect.map(jobs.findById(jobId), Option.getOrThrow))

const beat = Effect.zipRight(TestClock.adjust(heartbeatMs), settle)

/** A store whose beats record, lease by lease, whether they were asked to report a cancel. */
const recordingCancelQuestions =
  (asked: Array<ReadonlyArray<boolean>>) =>
  (jobs: AiJobLifecycleRepository["Type"]): AiJobLifecycleRepository["Type"] => ({
    ...jobs,
    extendLocks: (held, ttl) =>
      Effect.suspend(() => {
        asked.push(held.map((entry) => entry.reportCancel))
        return jobs.extendLocks(held, ttl)
      })
  })

const outcomeOf = <A>(deferred: Deferred.Deferred<A>) =>
  Effect.map(Deferred.poll(deferred), (polled) => Option.isSome(polled))

/** Runs a test with the keeper's job events recorded (the keeper reads JobEvents when it is made). */
const withKeeper = <A, E, R>(body: (published: ReadonlyArray<JobEvent>) => Effect.Effect<A, E, R>) => {
  const published: Array<JobEvent> = []
  return body(published).pipe(
    Effect.updateService(JobEvents, (events) => ({
      ...events,
      publish: (event: JobEvent) => Effect.zipRight(Effect.sync(() => published.push(event)), events.publish(event))
    })),
    Effect.provide(LogCaptureLayer),
    Effect.provide(
      memoryEngineStack({
        timing: { jobHeartbeatInterval: Duration.millis(heartbeatMs), jobLockTtl: Duration.millis(lockTtlMs) }
      })
    )
  )
}

describe("the lease keeper's beats (memory layers, TestClock)", () => {
  it.scoped("each beat extends the lock from now and carries the progress reached, announcing a rise once; progress never falls", () =>
    withKeeper((published) =>
      Effect.gen(function*() {
        const keeper = yield* makeLeaseKeeper
        const { job, lease } = yield* lockedEcho("beat")
        const hold = yield* keeper.hold(lease, { progress: 5, honourCancel: true })
        yield* hold.reach(20)
        yield* TestClock.adjust(heartbeatMs - 1)
        yield* settle
        expect((yield* jobNow(job.id)).lockUntil).toStrictEqual(job.lockUntil)
        expect(published).toStrictEqual([])
        yield* TestClock.adjust(1)
        yield* settle
        const extended = yield* jobNow(job.id)
        expect([extended.progress, extended.lockUntil!.getTime()]).toStrictEqual([20, heartbeatMs + lockTtlMs])
        expect(
          published.map((event) => [event.jobId, event.lifecycleStatus, event.progress, event.stage, event.attempt])
        ).toStrictEqual([
          [job.id, "running", 20, "EXECUTE", 1]
        ])
        expect(DateTime.toEpochMillis(published[0]!.at)).toBe(heartbeatMs)
        // No rise, no event; a lower report changes nothing.
        yield* hold.reach(10)
        yield* beat
        expect(published).toHaveLength(1)
        const later = yield* jobNow(job.id)
        expect([later.progress, later.lockUntil!.getTime()]).toStrictEqual([20, 2 * heartbeatMs + lockTtlMs])
        // Beyond 100 is written and announced as 100.
        yield* hold.reach(250)
        yield* beat
        expect((yield* jobNow(job.id)).progress).toBe(100)
        expect(published.map((event) => [event.progress, event.stage])).toStrictEqual([[20, "EXECUTE"], [
          100,
          "PROJECT"
        ]])
        expect(yield* outcomeOf(hold.outcome)).toBe(false)
      })
    ))

  it.scoped("a lease taken by another worker is stopped as lost at the next beat; the others beat on", () =>
    withKeeper(() =>
      Effect.gen(function*() {
        const jobs = yield* AiJobLifecycleRepository
        const keeper = yield* makeLeaseKeeper
        const lost = yield* lockedEcho("lost")
        const kept = yield* lockedEcho("kept")
        const lostHold = yield* keeper.hold(lost.lease, { progress: 5, honourCancel: true })
        const keptHold = yield* keeper.hold(kept.lease, { progress: 5, honourCancel: true })
        yield* jobs.releaseLock(lost.lease)
        yield* jobs.takeOver(lost.job.id, "rescuer", Duration.millis(lockTtlMs))
        yield* beat
        expect(yield* Deferred.poll(lostHold.outcome)).toStrictEqual(Option.some(Exit.succeed({ _tag: "LockLost" })))
        expect(yield* outcomeOf(keptHold.outcome)).toBe(false)
        expect((yield* jobNow(kept.job.id)).lockUntil!.getTime()).toBe(heartbeatMs + lockTtlMs)
        expect((yield* jobNow(lost.job.id)).lockedBy).toBe("rescuer")
      })
    ))

  it.scoped("a cancel found requested stops a cancellable run, announcing its progress; a run that cannot be cancelled beats on", () =>
    withKeeper((published) =>
      Effect.gen(function*() {
        const jobs = yield* AiJobLifecycleRepository
        const asked: Array<ReadonlyArray<boolean>> = []
        const keeper = yield* makeLeaseKeeper.pipe(
          Effect.updateService(AiJobLifecycleRepository, recordingCancelQuestions(asked))
        )
        const cancellable = yield* lockedEcho("cancellable")
        const steady = yield* lockedEcho("steady")
        const cancellableHold = yield* keeper.hold(cancellable.lease, { progress: 5, honourCancel: true })
        const steadyHold = yield* keeper.hold(steady.lease, { progress: 5, honourCancel: false })
        yield* cancellableHold.reach(20)
        yield* jobs.requestCancel(cancellable.job.id)
        yield* jobs.requestCancel(steady.job.id)
        yield* beat
        expect(yield* Deferred.poll(cancellableHold.outcome)).toStrictEqual(
          Option.some(Exit.succeed({ _tag: "CancelRequested" }))
        )
        expect(published.map((event) => [event.jobId, event.progress])).toStrictEqual([[cancellable.job.id, 20]])
        for (let i = 0; i < 4; i++) yield* beat
        // Told once, the run is not asked about its cancel again; a run that cannot be cancelled never is.
        expect(asked).toStrictEqual([[true, false], [false, false], [false, false], [false, false], [false, false]])
        expect(yield* outcomeOf(steadyHold.outcome)).toBe(false)
        expect((yield* jobNow(steady.job.id)).lockUntil!.getTime()).toBe(5 * heartbeatMs + lockTtlMs)
      })
    ))

  it.scoped("a cancel message stops the cancellable run it names at once; others, and runs that cannot be cancelled, go on", () =>
    withKeeper(() =>
      Effect.gen(function*() {
        const cancels = yield* CancelSignal
        const asked: Array<ReadonlyArray<boolean>> = []
        const keeper = yield* makeLeaseKeeper.pipe(
          Effect.updateService(AiJobLifecycleRepository, recordingCancelQuestions(asked))
        )
        yield* settle
        const named = yield* lockedEcho("named")
        const other = yield* lockedEcho("other")
        const steady = yield* lockedEcho("steady")
        const namedHold = yield* keeper.hold(named.lease, { progress: 5, honourCancel: true })
        const otherHold = yield* keeper.hold(other.lease, { progress: 5, honourCancel: true })
        const steadyHold = yield* keeper.hold(steady.lease, { progress: 5, honourCancel: false })
        yield* cancels.publish("not-held-here")
        yield* cancels.publish(named.job.id)
        yield* cancels.publish(steady.job.id)
        yield* settle
        expect(yield* Deferred.poll(namedHold.outcome)).toStrictEqual(
          Option.some(Exit.succeed({ _tag: "CancelRequested" }))
        )
        expect(yield* outcomeOf(otherHold.outcome)).toBe(false)
        expect(yield* outcomeOf(steadyHold.outcome)).toBe(false)
        // The next beat no longer asks about the named run's cancel: the message told it.
        yield* beat
        expect(asked).toStrictEqual([[false, true, false]])
      })
    ))

  it.scoped("a beat that cannot write is logged and the next one extends the lease", () =>
    withKeeper(() =>
      Effect.gen(function*() {
        let beats = 0
        const keeper = yield* makeLeaseKeeper.pipe(
          Effect.updateService(AiJobLifecycleRepository, (jobs) => ({
            ...jobs,
            extendLocks: (held, ttl) =>
              Effect.suspend(() => {
                beats += 1
                return beats === 1
                  ? Effect.fail(new PersistenceError({ operation: "ai_job.extendLocks", message: "down" }))
                  : jobs.extendLocks(held, ttl)
              })
          }))
        )
        const { job, lease } = yield* lockedEcho("missed beat")
        const hold = yield* keeper.hold(lease, { progress: 5, honourCancel: true })
        yield* beat
        expect((yield* jobNow(job.id)).lockUntil).toStrictEqual(job.lockUntil)
        const warned = (yield* (yield* LogCapture).lines).filter((line) =>
          line.includes("lease beat could not extend the locks")
        )
        expect(warned).toHaveLength(1)
        expect(warned[0]).toContain("operation=ai_job.extendLocks")
        expect(warned[0]).toContain("stage=HEARTBEAT")
        yield* beat
        expect((yield* jobNow(job.id)).lockUntil!.getTime()).toBe(2 * heartbeatMs + lockTtlMs)
        expect(yield* outcomeOf(hold.outcome)).toBe(false)
      })
    ))

  it.scoped("a hold's lease is extended until its scope closes, even with an older lease of the same job released beside it", () =>
    withKeeper(() =>
      Effect.gen(function*() {
        const jobs = yield* AiJobLifecycleRepository
        const keeper = yield* makeLeaseKeeper
        const { job, lease } = yield* lockedEcho("two leases")
        const oldScope = yield* Scope.make()
        const oldHold = yield* keeper.hold(lease, { progress: 5, honourCancel: true }).pipe(Scope.extend(oldScope))
        // Its own lease expired (the process froze), and it took the job over again.
        yield* jobs.releaseLock(lease)
        const taken = yield* jobs.takeOver(job.id, "worker-1", Duration.millis(lockTtlMs))
        const newScope = yield* Scope.make()
        yield* keeper.hold(leaseOf(taken)!, { progress: 5, honourCancel: true }).pipe(Scope.extend(newScope))
        yield* beat
        expect(yield* Deferred.poll(oldHold.outcome)).toStrictEqual(Option.some(Exit.succeed({ _tag: "LockLost" })))
        yield* Scope.close(oldScope, Exit.void)
        yield* beat
        expect((yield* jobNow(job.id)).lockUntil!.getTime()).toBe(2 * heartbeatMs + lockTtlMs)
        yield* Scope.close(newScope, Exit.void)
        yield* beat
        expect((yield* jobNow(job.id)).lockUntil!.getTime()).toBe(2 * heartbeatMs + lockTtlMs)
      })
    ))

  it.scoped("a hand-off of everything stops every held run, and any run that takes a lease afterwards", () =>
    withKeeper(() =>
      Effect.gen(function*() {
        const keeper = yield* makeLeaseKeeper
        const first = yield* lockedEcho("first")
        const firstHold = yield* keeper.hold(first.lease, { progress: 5, honourCancel: false })
        yield* keeper.handOffAll
        expect(yield* Deferred.poll(firstHold.outcome)).toStrictEqual(Option.some(Exit.succeed({ _tag: "HandedOff" })))
        const late = yield* lockedEcho("late")
        const lateHold = yield* keeper.hold(late.lease, { progress: 5, honourCancel: true })
        expect(yield* Deferred.poll(lateHold.outcome)).toStrictEqual(Option.some(Exit.succeed({ _tag: "HandedOff" })))
      })
    ))

  it.scoped("a keeper holding nothing writes nothing on its beats", () =>
    withKeeper(() =>
      Effect.gen(function*() {
        let writes = 0
        const keeper = yield* makeLeaseKeeper.pipe(
          Effect.updateService(AiJobLifecycleRepository, (jobs) => ({
            ...jobs,
            extendLocks: (held, ttl) =>
              Effect.suspend(() => {
                writes += 1
                return jobs.extendLocks(held, ttl)
              })
          }))
        )
        for (let i = 0; i < 3; i++) yield* beat
        expect(writes).toBe(0)
        const { lease } = yield* lockedEcho("held")
        const scope = yield* Scope.make()
        yield* keeper.hold(lease, { progress: 5, honourCancel: true }).pipe(Scope.extend(scope))
        yield* beat
        expect(writes).toBe(1)
        yield* Scope.close(scope, Exit.void)
        for (let i = 0; i < 3; i++) yield* beat
        expect(writes).toBe(1)
      })
    ))
})
