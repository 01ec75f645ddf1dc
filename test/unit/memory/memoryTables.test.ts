import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Option, TestClock } from "effect"
import { leaseOf } from "../../../src/domain/AiJob.js"
import { newId } from "../../../src/domain/Ids.js"
import { MemoryArtifactRepository } from "../../../src/layers/memory/MemoryArtifactRepository.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { ArtifactRepository } from "../../../src/services/ArtifactRepository.js"
import { SnapshotRepository } from "../../../src/services/SnapshotRepository.js"
import { jobCreation, memoryRepositories } from "../../support/foundationStack.js"

// Built inside each test (not shared by the file), so every row a test asserts on is its own.
const stack = () => MemoryArtifactRepository.pipe(Layer.provideMerge(jobCreation(memoryRepositories)), Layer.orDie)

const createJob = Effect.gen(function* () {
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

const succeed = (jobId: string) =>
  Effect.gen(function* () {
    const repo = yield* AiJobLifecycleRepository
    const running = yield* repo.lockJob(jobId, "worker-a", 1_000)
    return yield* repo.markSucceeded(leaseOf(running)!, "a".repeat(64))
  })

describe("MemoryArtifactRepository", () => {
  it.effect("records each (type, artifact id) of a job once, and lists a job's own artifacts by ordinal, type, then id", () =>
    Effect.gen(function* () {
      const artifacts = yield* ArtifactRepository
      const first = { artifactType: "flashcard", artifactId: "c-2", ordinal: 1 }
      expect(yield* artifacts.record("job-1", [
        first,
        { artifactType: "flashcard", artifactId: "c-1", ordinal: 1 },
        { artifactType: "evaluation", artifactId: "e-1", ordinal: 1 },
        { artifactType: "flashcard", artifactId: "c-0", ordinal: 0 }
      ])).toStrictEqual({ inserted: 4, duplicates: 0 })
      // A repeated projection inserts nothing; the same pair on another job is that job's.
      expect(yield* artifacts.record("job-1", [first, { ...first, ordinal: 7 }, { ...first, artifactId: "c-3" }]))
        .toStrictEqual({ inserted: 1, duplicates: 2 })
      expect(yield* artifacts.record("job-2", [first])).toStrictEqual({ inserted: 1, duplicates: 0 })
      const listed = yield* artifacts.listByJob("job-1")
      expect(listed.map((a) => [a.ordinal, a.artifactType, a.artifactId])).toStrictEqual([
        [0, "flashcard", "c-0"],
        [1, "evaluation", "e-1"],
        [1, "flashcard", "c-1"],
        [1, "flashcard", "c-2"],
        [1, "flashcard", "c-3"]
      ])
      expect(listed.every((a) => a.jobId === "job-1")).toBe(true)
      expect(new Set(listed.map((a) => a.id)).size).toBe(5)
      expect((yield* artifacts.listByJob("job-2")).map((a) => a.artifactId)).toStrictEqual(["c-2"])
      expect(yield* artifacts.listByJob("job-3")).toStrictEqual([])
    }).pipe(Effect.provide(stack())))

  it.effect("a job's artifacts come with it only once it succeeded", () =>
    Effect.gen(function* () {
      const artifacts = yield* ArtifactRepository
      const job = yield* createJob
      yield* artifacts.record(job.id, [{ artifactType: "flashcard", artifactId: "c-1", ordinal: 0 }])
      const queued = Option.getOrThrow(yield* artifacts.findJobWithArtifacts(job.id))
      expect([queued.job.id, queued.job.lifecycleStatus, queued.artifacts]).toStrictEqual([job.id, "queued", []])
      yield* succeed(job.id)
      const done = Option.getOrThrow(yield* artifacts.findJobWithArtifacts(job.id))
      expect(done.job.lifecycleStatus).toBe("succeeded")
      expect(done.artifacts.map((a) => [a.jobId, a.artifactId])).toStrictEqual([[job.id, "c-1"]])
      expect(Option.isNone(yield* artifacts.findJobWithArtifacts(`missing-${yield* newId}`))).toBe(true)
    }).pipe(Effect.provide(stack())))
})

describe("MemorySnapshotRepository", () => {
  const snapshot = (jobId: string, expiresAtMs: number) =>
    Effect.map(newId, (id) => ({ id, jobId, content: { jobId }, redactionVersion: "v1", expiresAt: new Date(expiresAtMs) }))

  it.effect("one snapshot per job: a second one for the same job is refused and the first kept", () =>
    Effect.gen(function* () {
      const snapshots = yield* SnapshotRepository
      yield* snapshots.create(yield* snapshot("job-1", 5_000))
      const second = yield* Effect.either(snapshots.create(yield* snapshot("job-1", 9_000)))
      expect(Either.isLeft(second) && second.left._tag).toBe("PersistenceError")
      expect(Option.getOrThrow(yield* snapshots.findByJobId("job-1")).expiresAt.getTime()).toBe(5_000)
      expect(Option.isNone(yield* snapshots.findByJobId("job-2"))).toBe(true)
    }).pipe(Effect.provide(stack())))

  it.effect("deleteExpired removes only snapshots past their expiry, the oldest first, at most `limit`", () =>
    Effect.gen(function* () {
      const snapshots = yield* SnapshotRepository
      yield* TestClock.setTime(10_000)
      for (const [jobId, expiresAt] of [["job-c", 9_000], ["job-a", 7_000], ["job-now", 10_000], ["job-b", 8_000], ["job-later", 20_000]] as const) {
        yield* snapshots.create(yield* snapshot(jobId, expiresAt))
      }
      expect(yield* snapshots.deleteExpired(2)).toBe(2)
      const present = (jobId: string) => Effect.map(snapshots.findByJobId(jobId), Option.isSome)
      expect(yield* Effect.forEach(["job-a", "job-b", "job-c", "job-now", "job-later"], present))
        .toStrictEqual([false, false, true, true, true])
      expect(yield* snapshots.deleteExpired(10)).toBe(1)
      expect(yield* Effect.forEach(["job-c", "job-now", "job-later"], present)).toStrictEqual([false, true, true])
      expect(yield* snapshots.deleteExpired(10)).toBe(0)
    }).pipe(Effect.provide(stack())))
})
