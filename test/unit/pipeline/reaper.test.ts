import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Metric, Option, TestClock } from "effect"
import { leaseOf } from "../../../src/domain/AiJob.js"
import { publicMessageOf } from "../../../src/domain/ExecutionError.js"
import type { JobEvent } from "../../../src/domain/JobEvent.js"
import { PersistenceError } from "../../../src/domain/PersistenceError.js"
import { makeDispatcher } from "../../../src/pipeline/outbox/dispatcher.js"
import { queueJobIdsOf, redispatch } from "../../../src/pipeline/outbox/redispatch.js"
import { reapOnce, runReaper } from "../../../src/pipeline/reaper.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { reaperActions, tagged } from "../../../src/services/EngineMetrics.js"
import { JobEvents } from "../../../src/services/JobEvents.js"
import { JobQueue, payloadFor, queueJobIdFor, type QueueJobState } from "../../../src/services/JobQueue.js"
import { OutboxRepository } from "../../../src/services/outbox/OutboxRepository.js"
import { OutboxSignal } from "../../../src/services/outbox/OutboxSignal.js"
import { memoryEngineStack, settle } from "../../support/engineStack.js"
import { LogCapture, LogCaptureLayer } from "../../support/logCapture.js"

// The stack's defaults: lock TTL 15 s, grace 5 s, a queued job is stale after 30 s (the reaper's window).
const windowMs = 30_000

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

const jobNow = (jobId: string) =>
  Effect.flatMap(AiJobLifecycleRepository, (jobs) => Effect.map(jobs.findById(jobId), Option.getOrThrow))

/** The pending outbox events (claimed, so a second look sees only newer ones), with their dedupe keys and payloads. */
const takePendingEvents = Effect.flatMap(
  OutboxRepository,
  (outbox) =>
    Effect.map(
      outbox.claimBatch("inspector", 100),
      (events) =>
        events.map((event) => ({ aggregateId: event.aggregateId, dedupeKey: event.dedupeKey, payload: event.payload }))
    )
)

const windowNow = Effect.map(TestClock.currentTimeMillis, (now) => Math.floor(now / windowMs))

const actions = (action: string) => Effect.map(Metric.value(tagged(reaperActions, { action })), (state) => state.count)

/** Runs a test on the memory engine (no worker), keeping every job event published and every log line. */
const onEngine = <A, E, R>(
  body: (published: ReadonlyArray<JobEvent>) => Effect.Effect<A, E, R>,
  timing: Parameters<typeof memoryEngineStack>[0] = {}
) => {
  const published: Array<JobEvent> = []
  return body(published).pipe(
    Effect.updateService(JobEvents, (events) => ({
      ...events,
      publish: (event: JobEvent) => Effect.zipRight(Effect.sync(() => published.push(event)), events.publish(event))
    })),
    Effect.provide(LogCaptureLayer),
    Effect.provide(memoryEngineStack(timing))
  )
}

const reaperLines = Effect.map(
  Effect.flatMap(LogCapture, (capture) => capture.lines),
  (lines) => lines.filter((line) => line.includes("message=\"reaper pass\""))
)

describe("the lock reaper (memory layers, TestClock)", () => {
  it.scoped("a crashed job with attempts left is queued again once per lost lease and window, and again in the next window", () =>
    onEngine(() =>
      Effect.gen(function*() {
        const jobs = yield* AiJobLifecycleRepository
        const job = yield* createEcho("orphan")
        expect((yield* takePendingEvents).map((event) => event.aggregateId)).toStrictEqual([job.id])
        const locked = yield* jobs.lockJob(job.id, "dead-worker", Duration.millis(1_000))
        // Expired, but within the 5 s grace: left alone.
        yield* TestClock.adjust(4_000)
        expect(yield* reapOnce).toStrictEqual({
          cancelled: 0,
          requeued: 0,
          failed: 0,
          requeuedQueued: 0,
          snapshotsDeleted: 0
        })
        expect(yield* reaperLines).toStrictEqual([])
        const requeuedBefore = yield* actions("requeued")

        yield* TestClock.adjust(3_000)
        expect((yield* reapOnce).requeued).toBe(1)
        const window = yield* windowNow
        expect(yield* takePendingEvents).toStrictEqual([{
          aggregateId: job.id,
          dedupeKey: `ai.job.redispatch:${job.id}:${locked.leaseNo}:${window}`,
          payload: {
            jobId: job.id,
            jobType: "synthetic_echo",
            queueName: "ai-interactive",
            priority: job.priority,
            redispatchOf: `${locked.leaseNo}-${window}`
          }
        }])
        expect((yield* jobNow(job.id)).lifecycleStatus).toBe("running")
        expect((yield* actions("requeued")) - requeuedBefore).toBe(1)
        const [line] = yield* reaperLines
        expect(line).toContain("requeued=1")
        expect(line).toContain("failed=0")
        expect(line).toContain("stage=REAPER")

        // The same window: no second event.
        yield* TestClock.adjust(1_000)
        expect((yield* reapOnce).requeued).toBe(0)
        expect(yield* takePendingEvents).toStrictEqual([])
        // The next window: tried again.
        yield* TestClock.adjust(windowMs)
        expect((yield* reapOnce).requeued).toBe(1)
        expect((yield* takePendingEvents).map((event) => event.dedupeKey)).toStrictEqual([
          `ai.job.redispatch:${job.id}:${locked.leaseNo}:${window + 1}`
        ])
      })
    ))

  it.scoped("a handed-off job is queued again even with every attempt spent: a hand-off costs none", () =>
    onEngine(() =>
      Effect.gen(function*() {
        const jobs = yield* AiJobLifecycleRepository
        const job = yield* createEcho("handed off")
        yield* jobs.lockJob(job.id, "w1", Duration.millis(1_000))
        yield* TestClock.adjust(2_000)
        const second = yield* jobs.takeOver(job.id, "w2", Duration.millis(60_000))
        expect(second.attemptCount).toBe(second.maxAttempts)
        yield* jobs.releaseLock(leaseOf(second)!)
        yield* TestClock.adjust(6_000)
        expect(yield* reapOnce).toMatchObject({ requeued: 1, failed: 0 })
        expect((yield* jobNow(job.id)).lifecycleStatus).toBe("running")
      })
    ))

  it.scoped("a crashed job without attempts left fails as INTERNAL_WORKER_LOST; a cancelled one is cancelled; both are announced", () =>
    onEngine((published) =>
      Effect.gen(function*() {
        const jobs = yield* AiJobLifecycleRepository
        const lost = yield* createEcho("lost")
        yield* jobs.lockJob(lost.id, "w1", Duration.millis(1_000))
        yield* TestClock.adjust(2_000)
        yield* jobs.takeOver(lost.id, "w2", Duration.millis(1_000))
        const cancelled = yield* createEcho("cancel me")
        yield* jobs.lockJob(cancelled.id, "w3", Duration.millis(1_000))
        yield* jobs.requestCancel(cancelled.id)
        const before = { failed: yield* actions("failed"), cancelled: yield* actions("cancelled") }
        yield* TestClock.adjust(7_000)
        const start = published.length
        expect(yield* reapOnce).toMatchObject({ failed: 1, cancelled: 1, requeued: 0 })
        const [line] = yield* reaperLines
        expect(line).toContain("failed=1")
        expect(line).toContain("cancelled=1")
        const failed = yield* jobNow(lost.id)
        expect([failed.lifecycleStatus, failed.errorCode, failed.publicErrorMessage, failed.internalErrorMessage])
          .toStrictEqual([
            "failed",
            "INTERNAL_WORKER_LOST",
            publicMessageOf("INTERNAL_WORKER_LOST"),
            "lock held by w2 expired; 2 of 2 attempts used"
          ])
        expect(published.slice(start).map((event) => [event.jobId, event.lifecycleStatus]).sort()).toStrictEqual(
          [[lost.id, "failed"], [cancelled.id, "cancelled"]].sort()
        )
        expect({ failed: yield* actions("failed"), cancelled: yield* actions("cancelled") }).toStrictEqual({
          failed: before.failed + 1,
          cancelled: before.cancelled + 1
        })
        // Ended: a second pass has nothing to do.
        expect(yield* reapOnce).toMatchObject({ failed: 0, cancelled: 0, requeued: 0 })
      })
    ))

  it.scoped("a worker that comes back before the fenced cancel or fail wins: nothing is counted, announced or logged", () =>
    onEngine((published) =>
      Effect.gen(function*() {
        const jobs = yield* AiJobLifecycleRepository
        const exhausted = yield* createEcho("back in time")
        yield* jobs.lockJob(exhausted.id, "w1", Duration.millis(1_000))
        yield* TestClock.adjust(2_000)
        const takenOver = yield* jobs.takeOver(exhausted.id, "w2", Duration.millis(1_000))
        const cancelling = yield* createEcho("cancel refused")
        const cancelLocked = yield* jobs.lockJob(cancelling.id, "w3", Duration.millis(1_000))
        yield* jobs.requestCancel(cancelling.id)
        yield* TestClock.adjust(7_000)
        const before = { failed: yield* actions("failed"), cancelled: yield* actions("cancelled") }
        const start = published.length
        // Both workers beat between the reaper's scan and its writes: the fence (lock still expired) refuses.
        const pass = yield* reapOnce.pipe(
          Effect.updateService(AiJobLifecycleRepository, (repository) => ({
            ...repository,
            findExpiredLocks: (graceMs, limit) =>
              Effect.tap(repository.findExpiredLocks(graceMs, limit), () =>
                repository.extendLocks(
                  [leaseOf(takenOver)!, leaseOf(cancelLocked)!].map((held) => ({
                    lease: held,
                    progress: 0,
                    reportCancel: false
                  })),
                  Duration.millis(15_000)
                ))
          }))
        )
        expect(pass).toStrictEqual({ cancelled: 0, requeued: 0, failed: 0, requeuedQueued: 0, snapshotsDeleted: 0 })
        expect([(yield* jobNow(exhausted.id)).lifecycleStatus, (yield* jobNow(cancelling.id)).lifecycleStatus])
          .toStrictEqual(["running", "running"])
        expect(published.slice(start)).toStrictEqual([])
        expect({ failed: yield* actions("failed"), cancelled: yield* actions("cancelled") }).toStrictEqual(before)
        expect(yield* reaperLines).toStrictEqual([])
      })
    ))

  it.scoped("a storage error on one job skips it this pass; the pass goes on with the others", () =>
    onEngine(() =>
      Effect.gen(function*() {
        const jobs = yield* AiJobLifecycleRepository
        const broken = yield* createEcho("broken")
        const fine = yield* createEcho("fine")
        yield* takePendingEvents
        for (const job of [broken, fine]) yield* jobs.lockJob(job.id, "dead-worker", Duration.millis(1_000))
        yield* TestClock.adjust(7_000)
        const pass = yield* reapOnce.pipe(
          Effect.updateService(OutboxRepository, (outbox) => ({
            ...outbox,
            createInTransaction: (event) =>
              event.aggregateId === broken.id
                ? Effect.fail(new PersistenceError({ operation: "outbox_event.insert", message: "connection reset" }))
                : outbox.createInTransaction(event)
          }))
        )
        expect(pass.requeued).toBe(1)
        expect((yield* takePendingEvents).map((event) => event.aggregateId)).toStrictEqual([fine.id])
        const skipped = (yield* (yield* LogCapture).lines).filter((line) =>
          line.includes("reaper skipped a job this pass")
        )
        expect(skipped).toHaveLength(1)
        expect(skipped[0]).toContain(`jobId=${broken.id}`)
        expect(skipped[0]).toContain("error=connection reset")
        // The next pass queues it.
        expect((yield* reapOnce).requeued).toBe(1)
        expect((yield* takePendingEvents).map((event) => event.aggregateId)).toStrictEqual([broken.id])
      })
    ))

  it.scoped("a queued job whose delivery was lost is queued again; its requeue's queue job counts as a delivery for the next two windows", () =>
    onEngine(() =>
      Effect.gen(function*() {
        const queue = yield* JobQueue
        const job = yield* createEcho("lost delivery")
        yield* takePendingEvents
        // Not stale yet.
        yield* TestClock.adjust(windowMs - 500)
        expect((yield* reapOnce).requeuedQueued).toBe(0)
        const requeuedBefore = yield* actions("requeued_queued")
        yield* TestClock.adjust(1_000)
        const window = yield* windowNow
        const touchedAt = (yield* jobNow(job.id)).updatedAt.getTime()
        expect((yield* reapOnce).requeuedQueued).toBe(1)
        expect((yield* actions("requeued_queued")) - requeuedBefore).toBe(1)
        expect(yield* takePendingEvents).toStrictEqual([{
          aggregateId: job.id,
          dedupeKey: `ai.job.requeue:${job.id}:${touchedAt}`,
          payload: {
            jobId: job.id,
            jobType: "synthetic_echo",
            queueName: "ai-interactive",
            priority: job.priority,
            redispatchOf: `q${window}`
          }
        }])
        // The requeue reaches the queue and waits there (no worker).
        yield* queue.add({
          queueName: "ai-interactive",
          payload: payloadFor({
            jobId: job.id,
            jobType: job.jobType,
            createdAt: job.createdAt,
            redispatchOf: `q${window}`
          }),
          priority: job.priority
        })
        for (let later = 1; later <= 2; later++) {
          yield* TestClock.adjust(windowMs + 100)
          expect((yield* windowNow) - window).toBe(later)
          const touchedBefore = (yield* jobNow(job.id)).updatedAt.getTime()
          const pass = yield* reapOnce
          expect(pass.requeuedQueued).toBe(0)
          expect(yield* takePendingEvents).toStrictEqual([])
          // Looked after: stale again only a window later.
          expect((yield* jobNow(job.id)).updatedAt.getTime()).toBeGreaterThan(touchedBefore)
        }
        // Three windows on, that queue job is no longer looked for.
        yield* TestClock.adjust(windowMs + 100)
        expect((yield* reapOnce).requeuedQueued).toBe(1)
      })
    ))

  it.scoped("a queued job waiting in the queue under its first queue job is only marked as looked after", () =>
    onEngine(() =>
      Effect.gen(function*() {
        const queue = yield* JobQueue
        const job = yield* createEcho("waiting")
        yield* takePendingEvents
        yield* queue.add({
          queueName: "ai-interactive",
          payload: payloadFor({ jobId: job.id, jobType: job.jobType, createdAt: job.createdAt }),
          priority: job.priority
        })
        yield* TestClock.adjust(windowMs + 1_000)
        expect((yield* reapOnce).requeuedQueued).toBe(0)
        expect(yield* takePendingEvents).toStrictEqual([])
        expect((yield* jobNow(job.id)).updatedAt.getTime()).toBe(yield* TestClock.currentTimeMillis)
        const lines = yield* reaperLines
        expect(lines).toStrictEqual([])
      })
    ))

  it.scoped("a queued job taken by a consumer less than a lease ago is pending; one active for a lease without locking it is queued again", () =>
    onEngine(() =>
      Effect.gen(function*() {
        const fresh = yield* createEcho("just taken")
        const alsoFresh = yield* createEcho("taken a moment ago")
        const stuck = yield* createEcho("taken by a worker that died before PREPARE")
        yield* takePendingEvents
        yield* TestClock.adjust(windowMs + 1_000)
        const now = yield* TestClock.currentTimeMillis
        // The stack's lease is 15 s: two consumers took their first delivery less than a lease ago (1 ms short, 1 s), the third a whole lease ago.
        const activeSince = new Map([
          [queueJobIdsOf(fresh, yield* windowNow)[0], now - 15_000 + 1],
          [queueJobIdsOf(alsoFresh, yield* windowNow)[0], now - 1_000],
          [queueJobIdsOf(stuck, yield* windowNow)[0], now - 15_000]
        ])
        const pass = yield* reapOnce.pipe(
          Effect.updateService(JobQueue, (jobQueue) => ({
            ...jobQueue,
            state: (_queueName, queueJobId) =>
              Effect.sync((): QueueJobState => {
                const since = activeSince.get(queueJobId)
                return since === undefined ? { _tag: "Gone" } : { _tag: "Active", activeSinceMs: since }
              })
          }))
        )
        expect(pass.requeuedQueued).toBe(1)
        expect((yield* takePendingEvents).map((event) => event.aggregateId)).toStrictEqual([stuck.id])
        const [line] = yield* reaperLines
        expect(line).toContain("requeuedQueued=1")
        expect(line).toContain("stillPending=2")
      })
    ))

  it.scoped("expired snapshots are deleted and counted", () =>
    onEngine(() =>
      Effect.gen(function*() {
        const job = yield* createEcho("old")
        yield* Effect.flatMap(AiJobLifecycleRepository, (jobs) => jobs.requestCancel(job.id))
        const before = yield* actions("snapshots_deleted")
        yield* TestClock.adjust(59_000)
        expect((yield* reapOnce).snapshotsDeleted).toBe(0)
        yield* TestClock.adjust(2_000)
        expect((yield* reapOnce).snapshotsDeleted).toBe(1)
        expect((yield* actions("snapshots_deleted")) - before).toBe(1)
        expect((yield* reaperLines)[0]).toContain("snapshotsDeleted=1")
      }), { timing: { snapshotRetention: Duration.millis(60_000) } }))

  it.scoped("the reaper loop runs a pass every REAPER_INTERVAL_MS and goes on after a pass that failed", () =>
    onEngine(() =>
      Effect.gen(function*() {
        const jobs = yield* AiJobLifecycleRepository
        let passes = 0
        const loop = yield* Effect.fork(runReaper.pipe(
          Effect.updateService(AiJobLifecycleRepository, (repo) => ({
            ...repo,
            findExpiredLocks: (graceMs, limit) =>
              Effect.suspend(() => {
                passes += 1
                return passes === 1
                  ? Effect.fail(new PersistenceError({ operation: "ai_job.findExpiredLocks", message: "down" }))
                  : repo.findExpiredLocks(graceMs, limit)
              })
          }))
        ))
        yield* settle
        expect(passes).toBe(1)
        const job = yield* createEcho("orphan")
        yield* jobs.lockJob(job.id, "dead-worker", Duration.millis(1_000))
        yield* TestClock.adjust(4_999)
        yield* settle
        expect(passes).toBe(1)
        yield* TestClock.adjust(1)
        yield* settle
        expect(passes).toBe(2)
        yield* TestClock.adjust(5_000)
        yield* settle
        expect(passes).toBe(3)
        const failedLines = (yield* (yield* LogCapture).lines).filter((line) => line.includes("reaper pass failed"))
        expect(failedLines).toHaveLength(1)
        // The orphan (expired 9 s ago, past the grace) was queued again by a later pass.
        expect((yield* takePendingEvents).map((event) => event.dedupeKey)).toContainEqual(
          expect.stringMatching(new RegExp(`^ai\\.job\\.redispatch:${job.id}:`))
        )
        yield* Fiber.interrupt(loop)
      })
    ))

  it.scoped("a pass that queues nothing again wakes no dispatcher", () =>
    onEngine(() =>
      Effect.gen(function*() {
        const job = yield* createEcho("old")
        yield* Effect.flatMap(AiJobLifecycleRepository, (jobs) => jobs.requestCancel(job.id))
        yield* TestClock.adjust(61_000)
        const signal = yield* OutboxSignal
        // The create's own signal, still latched: taken first.
        yield* signal.await
        const woken = yield* Effect.fork(signal.await)
        yield* settle
        // Something to do (an expired snapshot), nothing to queue.
        expect(yield* reapOnce).toMatchObject({ requeued: 0, requeuedQueued: 0, snapshotsDeleted: 1 })
        yield* settle
        expect(yield* Fiber.poll(woken)).toStrictEqual(Option.none())
      }), { timing: { snapshotRetention: Duration.millis(60_000) } }))

  it.scoped("a redispatch already written in this window writes nothing and wakes no dispatcher", () =>
    onEngine(() =>
      Effect.gen(function*() {
        const job = yield* createEcho("orphan")
        const locked = yield* Effect.flatMap(AiJobLifecycleRepository, (jobs) =>
          jobs.lockJob(job.id, "dead-worker", Duration.millis(1_000)))
        yield* takePendingEvents
        let notified = 0
        const counted = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
          Effect.updateService(effect, OutboxSignal, (signal) => ({
            ...signal,
            notify: Effect.zipRight(
              Effect.sync(() =>
                notified++
              ),
              signal.notify
            )
          }))
        expect((yield* counted(redispatch(locked, 7))).duplicate).toBe(false)
        expect(notified).toBe(1)
        expect((yield* counted(redispatch(locked, 7))).duplicate).toBe(true)
        expect(notified).toBe(1)
        expect((yield* takePendingEvents).map((event) => event.dedupeKey)).toStrictEqual([
          `ai.job.redispatch:${job.id}:${locked.leaseNo}:7`
        ])
      })
    ))

  it.scoped("what the reaper queues again wakes the dispatcher at once, long before its poll", () =>
    onEngine(() =>
      Effect.gen(function*() {
        const jobs = yield* AiJobLifecycleRepository
        const queue = yield* JobQueue
        const orphan = yield* createEcho("orphan")
        const lost = yield* createEcho("lost delivery")
        // Both create events were published by a dispatcher whose adds the queue lost.
        const outbox = yield* OutboxRepository
        const careless = yield* outbox.claimBatch("careless", 10)
        yield* outbox.markPublishedMany(careless.map((event) => event.id), "careless")
        const locked = yield* jobs.lockJob(orphan.id, "dead-worker", Duration.millis(1_000))
        const dispatcher = yield* makeDispatcher
        yield* Effect.forkScoped(dispatcher.run)
        yield* settle
        // The orphan alone (the lost delivery is not stale yet): its redispatch wakes the dispatcher.
        yield* TestClock.adjust(7_000)
        const first = yield* windowNow
        expect(yield* reapOnce).toMatchObject({ requeued: 1, requeuedQueued: 0 })
        yield* settle
        expect(yield* queue.contains("ai-interactive", `${queueJobIdFor(orphan.id)}-r${locked.leaseNo}-${first}`)).toBe(
          true
        )
        // Then the lost delivery alone (the orphan is cancelled by the same pass): its requeue wakes it.
        yield* jobs.requestCancel(orphan.id)
        yield* TestClock.adjust(windowMs)
        const second = yield* windowNow
        expect(yield* reapOnce).toMatchObject({ requeued: 0, cancelled: 1, requeuedQueued: 1 })
        yield* settle
        expect(yield* queue.contains("ai-interactive", `${queueJobIdFor(lost.id)}-rq${second}`)).toBe(true)
      }), { timing: { outboxPollInterval: Duration.millis(600_000) } }))
})
