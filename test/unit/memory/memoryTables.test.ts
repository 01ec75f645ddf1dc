import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either, Layer, Option, TestClock } from "effect"
import { leaseOf } from "../../../src/domain/AiJob.js"
import { newId } from "../../../src/domain/Ids.js"
import { PersistenceError } from "../../../src/domain/PersistenceError.js"
import { MemoryArtifactRepository } from "../../../src/layers/memory/MemoryArtifactRepository.js"
import { MemoryCredentialRepository } from "../../../src/layers/memory/MemoryCredentialRepository.js"
import { MemoryDatabase } from "../../../src/layers/memory/MemoryDatabase.js"
import { MemoryProjectionStore } from "../../../src/layers/memory/MemoryProjectionStore.js"
import { MemoryUsageLogRepository } from "../../../src/layers/memory/MemoryUsageLogRepository.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { ArtifactRepository } from "../../../src/services/ArtifactRepository.js"
import { CredentialRepository } from "../../../src/services/CredentialRepository.js"
import { ProjectionStore } from "../../../src/services/ProjectionStore.js"
import { SnapshotRepository } from "../../../src/services/SnapshotRepository.js"
import { UsageLog } from "../../../src/services/UsageLog.js"
import { jobCreation, memoryRepositories } from "../../support/foundationStack.js"

// Built inside each test (not shared by the file), so every row a test asserts on is its own.
const stack = () => MemoryArtifactRepository.pipe(Layer.provideMerge(jobCreation(memoryRepositories)), Layer.orDie)

const createJob = Effect.gen(function*() {
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
  Effect.gen(function*() {
    const repo = yield* AiJobLifecycleRepository
    const running = yield* repo.lockJob(jobId, "worker-a", Duration.millis(1_000))
    return yield* repo.markSucceeded(leaseOf(running)!, "a".repeat(64), { locked: running })
  })

describe("MemoryArtifactRepository", () => {
  it.effect("records each (type, artifact id) of a job once, and lists a job's own artifacts by ordinal, type, then id", () =>
    Effect.gen(function*() {
      const artifacts = yield* ArtifactRepository
      const first = { artifactType: "flashcard", artifactId: "c-2", ordinal: 1 }
      expect(
        yield* artifacts.record("job-1", [
          first,
          { artifactType: "flashcard", artifactId: "c-1", ordinal: 1 },
          { artifactType: "evaluation", artifactId: "e-1", ordinal: 1 },
          { artifactType: "flashcard", artifactId: "c-0", ordinal: 0 }
        ])
      ).toStrictEqual({ inserted: 4, duplicates: 0 })
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
    Effect.gen(function*() {
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
    Effect.map(
      newId,
      (id) => ({ id, jobId, content: { jobId }, redactionVersion: "v1", expiresAt: new Date(expiresAtMs) })
    )

  it.effect("one snapshot per job: a second one for the same job is refused and the first kept", () =>
    Effect.gen(function*() {
      const snapshots = yield* SnapshotRepository
      yield* snapshots.create(yield* snapshot("job-1", 5_000))
      const second = yield* Effect.either(snapshots.create(yield* snapshot("job-1", 9_000)))
      expect(Either.isLeft(second) && [second.left._tag, second.left.operation, second.left.message]).toStrictEqual([
        "PersistenceError",
        "ai_job_snapshot.create",
        "job job-1 already has a snapshot"
      ])
      expect(Option.getOrThrow(yield* snapshots.findByJobId("job-1")).expiresAt.getTime()).toBe(5_000)
      expect(Option.isNone(yield* snapshots.findByJobId("job-2"))).toBe(true)
    }).pipe(Effect.provide(stack())))

  it.effect("deleteExpired removes only snapshots past their expiry, the oldest first, at most `limit`", () =>
    Effect.gen(function*() {
      const snapshots = yield* SnapshotRepository
      yield* TestClock.setTime(10_000)
      // Eight expired (expiring at 1000 .. 8000, created in no particular order), one expiring now, one later.
      const expiring = [5, 2, 8, 1, 7, 3, 6, 4].map((n) => [`job-${n}`, n * 1_000] as const)
      for (const [jobId, expiresAt] of [...expiring, ["job-now", 10_000], ["job-later", 20_000]] as const) {
        yield* snapshots.create(yield* snapshot(jobId, expiresAt))
      }
      expect(yield* snapshots.deleteExpired(4)).toBe(4)
      const present = (jobId: string) => Effect.map(snapshots.findByJobId(jobId), Option.isSome)
      const oldestFirst = [1, 2, 3, 4, 5, 6, 7, 8].map((n) => `job-${n}`)
      expect(yield* Effect.forEach([...oldestFirst, "job-now", "job-later"], present))
        .toStrictEqual([false, false, false, false, true, true, true, true, true, true])
      expect(yield* snapshots.deleteExpired(10)).toBe(4)
      expect(yield* Effect.forEach([...oldestFirst.slice(4), "job-now", "job-later"], present))
        .toStrictEqual([false, false, false, false, true, true])
      expect(yield* snapshots.deleteExpired(10)).toBe(0)
    }).pipe(Effect.provide(stack())))
})

describe("MemoryCredentialRepository on the store's clock", () => {
  const credentials = () =>
    Layer.merge(MemoryCredentialRepository, MemoryUsageLogRepository).pipe(Layer.provideMerge(stack()))
  const key = (id: string, provider = "deepseek") => ({
    id,
    userId: "user-1",
    provider,
    encryptedKey: "ZW5j",
    iv: "aXY=",
    authTag: "dGFn",
    keyVersion: 1,
    keyFingerprint: "f".repeat(64)
  })
  const stamps = (id: string) =>
    Effect.map(
      Effect.flatMap(CredentialRepository, (repo) => repo.findById(id)),
      (row) => Option.map(row, (r) => [r.createdAt.getTime(), r.updatedAt.getTime(), r.revokedAt?.getTime() ?? null])
    )

  it.effect("a replaced key is revoked when it is replaced, and keeps that time when later keys replace others", () =>
    Effect.gen(function*() {
      const repo = yield* CredentialRepository
      yield* TestClock.setTime(1_000)
      const first = yield* repo.insertReplacingActive(key("k-1"))
      expect([first.revokedAt, first.createdAt.getTime(), first.updatedAt.getTime()]).toStrictEqual([
        null,
        1_000,
        1_000
      ])
      yield* TestClock.setTime(2_000)
      yield* repo.insertReplacingActive(key("k-2"))
      yield* repo.insertReplacingActive(key("k-other", "openai"))
      yield* TestClock.setTime(3_000)
      yield* repo.insertReplacingActive(key("k-3"))
      expect(yield* stamps("k-1")).toStrictEqual(Option.some([1_000, 2_000, 2_000]))
      expect(yield* stamps("k-2")).toStrictEqual(Option.some([2_000, 3_000, 3_000]))
      expect(yield* stamps("k-other")).toStrictEqual(Option.some([2_000, 2_000, null]))
      expect(Option.map(yield* repo.findActive("user-1", "deepseek"), (row) => row.id)).toStrictEqual(
        Option.some("k-3")
      )
      expect((yield* repo.listByUser("user-1")).map((row) => row.id)).toStrictEqual(["k-3", "k-other", "k-2", "k-1"])
      yield* TestClock.setTime(4_000)
      expect(yield* repo.revoke("k-3", "user-1")).toBe(true)
      expect(yield* stamps("k-3")).toStrictEqual(Option.some([3_000, 4_000, 4_000]))
      yield* TestClock.setTime(5_000)
      expect(yield* repo.reencrypt("k-1", 1, { encryptedKey: "bmV3", iv: "aXYy", authTag: "dGFnMg==", keyVersion: 2 }))
        .toBe(true)
      expect(yield* stamps("k-1")).toStrictEqual(Option.some([1_000, 5_000, 2_000]))
      expect(Option.map(yield* repo.findById("k-1"), (row) => [row.encryptedKey, row.iv, row.authTag, row.keyVersion]))
        .toStrictEqual(Option.some(["bmV3", "aXYy", "dGFnMg==", 2]))
      expect((yield* repo.listStale(2, 10)).map((row) => row.id)).toStrictEqual(["k-2", "k-3", "k-other"])
    }).pipe(Effect.provide(credentials())))

  it.effect("a second usage row for the same lease and call is refused, naming the write", () =>
    Effect.gen(function*() {
      const usage = yield* UsageLog
      const row = {
        id: "u-1",
        jobId: "job-1",
        leaseNo: 1,
        attemptNo: 1,
        credentialMode: "platform_key",
        provider: "synthetic",
        model: "echo-1",
        promptTokens: 1,
        completionTokens: 1,
        totalTokens: 2,
        costMicros: 3,
        latencyMs: 4,
        errorCode: null
      }
      yield* TestClock.setTime(7_000)
      expect((yield* usage.record(row)).createdAt.getTime()).toBe(7_000)
      const again = yield* Effect.either(usage.record({ ...row, id: "u-2" }))
      expect(Either.isLeft(again) && [again.left.operation, again.left.message]).toStrictEqual([
        "usageLog.record",
        "a usage row with this lease and call number exists"
      ])
      // Another job, lease or call number is another row.
      yield* usage.record({ ...row, id: "u-3", jobId: "job-2" })
      yield* usage.record({ ...row, id: "u-4", leaseNo: 2 })
      yield* usage.record({ ...row, id: "u-5", attemptNo: 2 })
      expect((yield* usage.listByJobId("job-1")).map((r) => r.id)).toStrictEqual(["u-1", "u-5", "u-4"])
    }).pipe(Effect.provide(credentials())))
})

describe("the memory tables' writes under an injected write fault", () => {
  it.effect("each refusal names the write that failed", () =>
    Effect.gen(function*() {
      const db = yield* MemoryDatabase
      const artifacts = yield* ArtifactRepository
      const snapshots = yield* SnapshotRepository
      const credentials = yield* CredentialRepository
      const usage = yield* UsageLog
      const projections = yield* ProjectionStore
      yield* db.setFaults(
        Option.some((operation) => Effect.succeed(operation === "write" ? Option.some("disk gone") : Option.none()))
      )
      const operationOf = <A, E>(effect: Effect.Effect<A, E>) =>
        Effect.map(Effect.either(effect), (result) =>
          Either.isLeft(result) && result.left instanceof PersistenceError ? result.left.operation : "not refused")
      const credential = {
        id: "k-1",
        userId: "u",
        provider: "deepseek",
        encryptedKey: "e",
        iv: "i",
        authTag: "t",
        keyVersion: 1,
        keyFingerprint: "f"
      }
      const calls: ReadonlyArray<readonly [string, Effect.Effect<unknown, unknown>]> = [
        [
          "ai_job_artifact.record",
          artifacts.record("job-1", [{ artifactType: "flashcard", artifactId: "c-1", ordinal: 0 }])
        ],
        [
          "ai_job_snapshot.create",
          snapshots.create({ id: "s-1", jobId: "job-1", content: {}, redactionVersion: "v1", expiresAt: new Date(0) })
        ],
        ["ai_job_snapshot.deleteExpired", snapshots.deleteExpired(10)],
        ["credential.insertReplacingActive", credentials.insertReplacingActive(credential)],
        ["credential.revoke", credentials.revoke("k-1", "u")],
        [
          "credential.reencrypt",
          credentials.reencrypt("k-1", 1, { encryptedKey: "e", iv: "i", authTag: "t", keyVersion: 2 })
        ],
        [
          "usageLog.record",
          usage.record({
            id: "u-1",
            jobId: "job-1",
            leaseNo: 1,
            attemptNo: 1,
            credentialMode: "platform_key",
            provider: "p",
            model: "m",
            promptTokens: 0,
            completionTokens: 0,
            totalTokens: 0,
            costMicros: 0,
            latencyMs: 0,
            errorCode: null
          })
        ],
        ["cards.insert", projections.insert("cards", [{ id: "c-1", job_id: "job-1" }], { uniqueBy: [] })]
      ]
      expect(
        yield* Effect.forEach(calls, ([, call]) =>
          operationOf(call))
      ).toStrictEqual(calls.map(([operation]) =>
        operation
      ))
    }).pipe(
      Effect.provide(
        Layer.mergeAll(MemoryCredentialRepository, MemoryUsageLogRepository, MemoryProjectionStore).pipe(
          Layer.provideMerge(stack())
        )
      )
    ))
})
