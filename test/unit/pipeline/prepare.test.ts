import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either, Metric, Option, TestClock } from "effect"
import { PersistenceError } from "../../../src/domain/PersistenceError.js"
import { prepare } from "../../../src/pipeline/prepare.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { jobQueueWait, tagged } from "../../../src/services/EngineMetrics.js"
import { payloadFor } from "../../../src/services/JobQueue.js"
import { SnapshotRepository } from "../../../src/services/SnapshotRepository.js"
import { memoryEngineStack } from "../../support/engineStack.js"
import { LogCapture, LogCaptureLayer } from "../../support/logCapture.js"
import { createEcho, jobNow, withEvents } from "../../support/pipelineFixtures.js"

const payloadOf = (
  job: { readonly id: string; readonly jobType: string; readonly createdAt: Date },
  jobType = job.jobType
) => payloadFor({ jobId: job.id, jobType, createdAt: job.createdAt })

const queueWait = Metric.value(tagged(jobQueueWait, { job_type: "synthetic_echo" }))

describe("PREPARE locks a job or skips the delivery", () => {
  it.scoped("a queued job is locked at progress 5 with its snapshot, its event published, its time in the queue observed", () =>
    withEvents((published) =>
      Effect.gen(function*() {
        // Created well after the epoch: the wait is the difference of two real instants.
        yield* TestClock.adjust(10_000)
        const job = yield* createEcho("lock me")
        const before = yield* queueWait
        yield* TestClock.adjust(4_000)
        const prepared = Option.getOrThrow(yield* prepare(payloadOf(job), "worker-1", Duration.millis(60_000)))
        expect([prepared.job.lifecycleStatus, prepared.job.progress, prepared.lease.workerId, prepared.lease.attempt])
          .toStrictEqual(["running", 5, "worker-1", 1])
        expect(prepared.registered.definition.jobType).toBe("synthetic_echo")
        expect(Option.map(prepared.snapshot, (snapshot) => snapshot.content)).toStrictEqual(
          Option.some({ message: "lock me" })
        )
        expect((yield* jobNow(job.id)).lockUntil!.getTime()).toBe(14_000 + 60_000)
        expect(published.map((event) => [event.jobId, event.lifecycleStatus, event.progress, event.attempt]))
          .toStrictEqual([
            [job.id, "running", 5, 1]
          ])
        const after = yield* queueWait
        expect(after.count - before.count).toBe(1)
        expect(after.sum - before.sum).toBe(4)
      })
    ))

  it.scoped("a job taken over is read with its snapshot; when the snapshot cannot be read the lock is released and the delivery given back", () =>
    Effect.gen(function*() {
      const jobs = yield* AiJobLifecycleRepository
      const orphan = yield* createEcho("orphaned")
      yield* jobs.lockJob(orphan.id, "w1", Duration.millis(1_000))
      yield* TestClock.adjust(2_000)
      const unreadable = yield* Effect.either(
        prepare(payloadOf(orphan), "w2", Duration.millis(1_000)).pipe(
          Effect.updateService(SnapshotRepository, (snapshots) => ({
            ...snapshots,
            findByJobId: () =>
              Effect.fail(new PersistenceError({ operation: "ai_job_snapshot.read", message: "connection reset" }))
          }))
        )
      )
      expect(Either.isLeft(unreadable) && unreadable.left.operation).toBe("ai_job_snapshot.read")
      // Released: the next delivery takes it at once, in the same attempt.
      expect([(yield* jobNow(orphan.id)).lockedBy, (yield* jobNow(orphan.id)).attemptCount]).toStrictEqual([null, 2])
      const prepared = Option.getOrThrow(yield* prepare(payloadOf(orphan), "w3", Duration.millis(1_000)))
      expect([prepared.lease.workerId, prepared.lease.attempt]).toStrictEqual(["w3", 2])
      expect(Option.map(prepared.snapshot, (snapshot) => snapshot.content)).toStrictEqual(
        Option.some({ message: "orphaned" })
      )
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a running job whose lock expired is taken over in a new attempt, its event published", () =>
    withEvents((published) =>
      Effect.gen(function*() {
        const jobs = yield* AiJobLifecycleRepository
        const job = yield* createEcho("orphaned")
        yield* jobs.lockJob(job.id, "dead-worker", Duration.millis(1_000))
        yield* TestClock.adjust(2_000)
        const before = published.length
        const prepared = Option.getOrThrow(yield* prepare(payloadOf(job), "worker-2", Duration.millis(60_000)))
        expect([prepared.lease.workerId, prepared.lease.attempt, prepared.job.progress]).toStrictEqual([
          "worker-2",
          2,
          5
        ])
        // Read after the takeover: RESOLVE has it as after a first lock.
        expect(Option.map(prepared.snapshot, (snapshot) => snapshot.content)).toStrictEqual(
          Option.some({ message: "orphaned" })
        )
        expect(published.slice(before).map((event) => [event.lifecycleStatus, event.attempt])).toStrictEqual([[
          "running",
          2
        ]])
      })
    ))

  it.scoped("a delivery is skipped, nothing written, for an unknown type, a missing job, a type mismatch, a live lock, a spent job, a terminal job", () =>
    withEvents((published) =>
      Effect.gen(function*() {
        const jobs = yield* AiJobLifecycleRepository
        const queued = yield* createEcho("queued")
        const skipped = (payload: ReturnType<typeof payloadOf>) =>
          Effect.map(prepare(payload, "worker-9", Duration.millis(60_000)), Option.isNone)

        expect(yield* skipped(payloadOf(queued, "no_such_type"))).toBe(true)
        expect(yield* skipped(payloadOf({ ...queued, id: "no-such-job" }))).toBe(true)
        expect(yield* skipped(payloadOf(queued, "flashcard_generation"))).toBe(true)
        expect(yield* jobNow(queued.id)).toStrictEqual(queued)

        const held = yield* createEcho("held")
        const locked = yield* jobs.lockJob(held.id, "worker-1", Duration.millis(60_000))
        expect(yield* skipped(payloadOf(held))).toBe(true)
        expect(yield* jobNow(held.id)).toStrictEqual(locked)

        // Locked and taken over once: both attempts spent (maxAttempts 2), the lock expired again.
        const spent = yield* createEcho("spent")
        yield* jobs.lockJob(spent.id, "w1", Duration.millis(1_000))
        yield* TestClock.adjust(2_000)
        yield* jobs.takeOver(spent.id, "w2", Duration.millis(1_000))
        yield* TestClock.adjust(2_000)
        const spentBefore = yield* jobNow(spent.id)
        expect(spentBefore.attemptCount).toBe(spentBefore.maxAttempts)
        expect(yield* skipped(payloadOf(spent))).toBe(true)
        expect(yield* jobNow(spent.id)).toStrictEqual(spentBefore)

        const cancelled = yield* createEcho("cancelled")
        yield* jobs.requestCancel(cancelled.id)
        const cancelledRow = yield* jobNow(cancelled.id)
        expect(cancelledRow.lifecycleStatus).toBe("cancelled")
        const before = published.length
        expect(yield* skipped(payloadOf(cancelled))).toBe(true)
        expect(
          Option.isNone(yield* prepare(payloadOf(queued, "flashcard_generation"), "worker-9", Duration.millis(60_000)))
        ).toBe(true)
        expect(yield* jobNow(cancelled.id)).toStrictEqual(cancelledRow)
        expect(yield* jobNow(queued.id)).toStrictEqual(queued)
        expect(published.slice(before)).toStrictEqual([])
      })
    ))

  it.scoped("each lock and each skip says why in the log, with the stage, job and type", () =>
    Effect.gen(function*() {
      const jobs = yield* AiJobLifecycleRepository
      const lines = Effect.flatMap(LogCapture, (capture) => capture.lines)
      const logged = (text: string) => Effect.map(lines, (all) => all.filter((line) => line.includes(text)))
      const queued = yield* createEcho("logged")
      yield* prepare(payloadOf(queued, "no_such_type"), "worker-9", Duration.millis(60_000))
      const [unknown] = yield* logged("delivery names a job type this worker does not know")
      expect(unknown).toContain("ERROR")
      expect(unknown).toContain("stage=PREPARE")
      expect(unknown).toContain(`jobId=${queued.id}`)
      expect(unknown).toContain("jobType=no_such_type")
      yield* prepare(payloadOf({ ...queued, id: "no-such-job" }), "worker-9", Duration.millis(60_000))
      expect(yield* logged("delivery skipped: no such job")).toHaveLength(1)
      yield* prepare(payloadOf(queued, "flashcard_generation"), "worker-9", Duration.millis(60_000))
      expect(yield* logged("delivery skipped: the delivery's job type does not match the job")).toHaveLength(1)

      yield* prepare(payloadOf(queued), "worker-1", Duration.millis(60_000))
      const [locked] = yield* logged("message=\"job locked\"")
      expect(locked).toContain("attempt=1")
      // Locked after the group's statement lost it (read, then locked alone): logged and timed alike.
      const read = yield* createEcho("read first")
      const waitBefore = (yield* queueWait).count
      yield* prepare(payloadOf(read), "worker-1", Duration.millis(60_000), () => Effect.succeed(Option.none()))
      expect(yield* logged("message=\"job locked\"")).toHaveLength(2)
      expect((yield* queueWait).count - waitBefore).toBe(1)
      expect(yield* logged("expired lock taken over")).toStrictEqual([])
      yield* prepare(payloadOf(queued), "worker-9", Duration.millis(60_000))
      expect(yield* logged("delivery skipped: another worker holds the job")).toHaveLength(1)

      const orphan = yield* createEcho("orphan")
      yield* jobs.lockJob(orphan.id, "w1", Duration.millis(1_000))
      yield* TestClock.adjust(2_000)
      const takeoverWait = (yield* queueWait).count
      yield* prepare(payloadOf(orphan), "w2", Duration.millis(1_000))
      // A takeover is no wait in the queue.
      expect((yield* queueWait).count).toBe(takeoverWait)
      expect(yield* logged("message=\"job locked\"")).toHaveLength(2)
      const [taken] = yield* logged("expired lock taken over")
      expect(taken).toContain("attempt=2")
      yield* TestClock.adjust(2_000)
      yield* prepare(payloadOf(orphan), "w3", Duration.millis(1_000))
      expect(yield* logged("delivery skipped: the job used every attempt; the reaper ends it")).toHaveLength(1)

      const cancelled = yield* createEcho("cancelled")
      yield* jobs.requestCancel(cancelled.id)
      yield* prepare(payloadOf(cancelled), "worker-9", Duration.millis(60_000))
      expect(yield* logged("delivery skipped: the job is already cancelled")).toHaveLength(1)

      // Read as queued, changed before the lock: a stale read is skipped, nothing written.
      const stale = yield* createEcho("stale read")
      const cancelledAfterRead = Effect.updateService(AiJobLifecycleRepository, (repo) => ({
        ...repo,
        findById: (jobId: string) =>
          Effect.tap(repo.findById(jobId), () => repo.requestCancel(jobId).pipe(Effect.ignore))
      }))
      expect(
        Option.isNone(
          yield* prepare(payloadOf(stale), "worker-9", Duration.millis(60_000), () => Effect.succeed(Option.none()))
            .pipe(
              cancelledAfterRead
            )
        )
      )
        .toBe(true)
      const staleRow = yield* jobNow(stale.id)
      expect(staleRow.lifecycleStatus).toBe("cancelled")
      expect(yield* logged("delivery skipped: the job left the state this delivery expected")).toHaveLength(1)
      expect(yield* jobNow(stale.id)).toStrictEqual(staleRow)
      const vanished = { ...stale, id: "vanished-job" }
      expect(Option.isNone(yield* prepare(payloadOf(vanished), "worker-9", Duration.millis(60_000)))).toBe(true)
      expect(yield* logged("delivery skipped: no such job")).toHaveLength(2)
    }).pipe(Effect.provide(LogCaptureLayer), Effect.provide(memoryEngineStack())))
})
