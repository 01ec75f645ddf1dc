import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer, TestClock } from "effect"
import { leaseOf } from "../../../src/domain/AiJob.js"
import { newId } from "../../../src/domain/Ids.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { jobCreation, memoryRepositories } from "../../support/foundationStack.js"

// The reaper's scans on the TestClock, each test on a store of its own: boundaries, order, limits.
const stack = () => jobCreation(memoryRepositories).pipe(Layer.orDie)

const createJob = Effect.flatMap(
  AiJobService,
  (service) =>
    Effect.flatMap(newId, (id) =>
      service.createJob({
        userId: `user-${id}`,
        jobType: "synthetic_echo",
        targetType: "test",
        targetId: "t",
        input: { message: "hi" }
      }))
).pipe(Effect.map(({ job }) => job))

describe("MemoryAiJobLifecycleRepository scans", () => {
  it.effect("findExpiredLocks: running jobs whose lock ended more than `grace` ago or was released, released first, then by lock end", () =>
    Effect.gen(function*() {
      const repo = yield* AiJobLifecycleRepository
      const first = yield* repo.lockJob((yield* createJob).id, "worker-a", Duration.millis(1_000))
      yield* TestClock.adjust(100)
      const second = yield* repo.lockJob((yield* createJob).id, "worker-a", Duration.millis(1_000))
      const released = yield* repo.lockJob((yield* createJob).id, "worker-a", Duration.millis(60_000))
      yield* repo.releaseLock(leaseOf(released)!)
      yield* createJob
      const done = yield* repo.lockJob((yield* createJob).id, "worker-a", Duration.millis(1))
      yield* repo.markSucceeded(leaseOf(done)!, "h", { locked: done })
      const expired = (grace: number, limit = 100) =>
        Effect.map(repo.findExpiredLocks(Duration.millis(grace), limit), (rows) => rows.map((row) => row.id))
      // Now 100: the first lock ends at 1000, the second at 1100.
      yield* TestClock.setTime(1_500)
      expect(yield* expired(500)).toStrictEqual([released.id])
      yield* TestClock.setTime(1_501)
      expect(yield* expired(500)).toStrictEqual([released.id, first.id])
      yield* TestClock.setTime(1_601)
      expect(yield* expired(500)).toStrictEqual([released.id, first.id, second.id])
      expect(yield* expired(500, 2)).toStrictEqual([released.id, first.id])
      expect(yield* expired(0)).toStrictEqual([released.id, first.id, second.id])
    }).pipe(Effect.provide(stack())))

  it.effect("findStaleQueued: queued jobs untouched for longer than given, oldest first, equal times by id, at most `limit`", () =>
    Effect.gen(function*() {
      const repo = yield* AiJobLifecycleRepository
      const together = [yield* createJob, yield* createJob, yield* createJob].map((job) => job.id).sort()
      yield* TestClock.adjust(100)
      const later = yield* createJob
      yield* repo.lockJob((yield* createJob).id, "worker-a", Duration.millis(1_000))
      const stale = (olderThan: number, limit = 100) =>
        Effect.map(repo.findStaleQueued(Duration.millis(olderThan), limit), (rows) => rows.map((row) => row.id))
      yield* TestClock.setTime(1_000)
      expect(yield* stale(1_000)).toStrictEqual([])
      yield* TestClock.setTime(1_001)
      expect(yield* stale(1_000)).toStrictEqual(together)
      expect(yield* stale(1_000, 2)).toStrictEqual(together.slice(0, 2))
      yield* TestClock.setTime(1_101)
      expect(yield* stale(1_000)).toStrictEqual([...together, later.id])
    }).pipe(Effect.provide(stack())))

  it.effect("countActive counts queued and running jobs of the user; countCreatedSince from the given time on", () =>
    Effect.gen(function*() {
      const repo = yield* AiJobLifecycleRepository
      const service = yield* AiJobService
      const create = (userId: string) =>
        Effect.map(
          service.createJob({
            userId,
            jobType: "synthetic_echo",
            targetType: "test",
            targetId: "t",
            input: { message: "hi" }
          }),
          ({ job }) => job
        )
      yield* TestClock.setTime(1_000)
      yield* create("user-a")
      const running = yield* repo.lockJob((yield* create("user-a")).id, "worker-a", Duration.millis(60_000))
      yield* TestClock.setTime(2_000)
      const done = yield* repo.lockJob((yield* create("user-a")).id, "worker-a", Duration.millis(60_000))
      yield* repo.markSucceeded(leaseOf(done)!, "h", { locked: done })
      yield* repo.requestCancel((yield* create("user-a")).id)
      yield* create("user-b")
      expect(running.lifecycleStatus).toBe("running")
      expect(yield* repo.countActive("user-a")).toBe(2)
      expect(yield* repo.countActive("user-b")).toBe(1)
      expect(yield* repo.countCreatedSince("user-a", new Date(1_000))).toBe(4)
      expect(yield* repo.countCreatedSince("user-a", new Date(1_001))).toBe(2)
      expect(yield* repo.countCreatedSince("user-a", new Date(2_000))).toBe(2)
      expect(yield* repo.countCreatedSince("user-a", new Date(2_001))).toBe(0)
    }).pipe(Effect.provide(stack())))
})
