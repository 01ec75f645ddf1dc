import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either, Layer, TestClock } from "effect"
import { leaseOf } from "../../../src/domain/AiJob.js"
import { newId } from "../../../src/domain/Ids.js"
import { MemoryJobStatistics } from "../../../src/layers/memory/MemoryJobStatistics.js"
import { MemoryProjectionStore } from "../../../src/layers/memory/MemoryProjectionStore.js"
import { MemoryUsageLogRepository } from "../../../src/layers/memory/MemoryUsageLogRepository.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { JobStatistics } from "../../../src/services/JobStatistics.js"
import { ProjectionStore } from "../../../src/services/ProjectionStore.js"
import { UsageLog } from "../../../src/services/UsageLog.js"
import { jobCreation, memoryRepositories, memoryRepositoriesWith } from "../../support/foundationStack.js"

// The memory read models on the TestClock, each test on a store of its own.
const stack = () =>
  Layer.mergeAll(MemoryJobStatistics, MemoryUsageLogRepository, MemoryProjectionStore).pipe(
    Layer.provideMerge(jobCreation(memoryRepositories)),
    Layer.orDie
  )

const dayMs = 86_400_000

const createJob = (userId = "user-1", jobType = "synthetic_echo") =>
  Effect.flatMap(
    AiJobService,
    (service) => service.createJob({ userId, jobType, targetType: "test", targetId: "t", input: { message: "hi" } })
  ).pipe(
    Effect.map(({ job }) => job)
  )

const finish = (jobId: string) =>
  Effect.gen(function*() {
    const repo = yield* AiJobLifecycleRepository
    const running = yield* repo.lockJob(jobId, "worker-a", Duration.millis(60_000))
    return yield* repo.markSucceeded(leaseOf(running)!, "h", { locked: running })
  })

const usageRow = (jobId: string, attemptNo: number, totalTokens: number, costMicros: number) =>
  Effect.map(newId, (id) => ({
    id,
    jobId,
    leaseNo: 1,
    attemptNo,
    credentialMode: "platform_key",
    provider: "synthetic",
    model: "echo-1",
    promptTokens: 0,
    completionTokens: totalTokens,
    totalTokens,
    costMicros,
    latencyMs: 1,
    errorCode: null
  }))

describe("MemoryJobStatistics", () => {
  it.effect("counts jobs per type and status", () =>
    Effect.gen(function*() {
      const statistics = yield* JobStatistics
      expect(yield* statistics.countsByTypeAndStatus).toStrictEqual([])
      yield* createJob()
      yield* createJob("user-2")
      yield* finish((yield* createJob()).id)
      const counts = yield* statistics.countsByTypeAndStatus
      expect([...counts].sort((a, b) => a.lifecycleStatus.localeCompare(b.lifecycleStatus))).toStrictEqual([
        { jobType: "synthetic_echo", lifecycleStatus: "queued", total: 2 },
        { jobType: "synthetic_echo", lifecycleStatus: "succeeded", total: 1 }
      ])
    }).pipe(Effect.provide(stack())))

  it.effect("finishedWithin: jobs finished in the window (its start included), oldest first, equal times by id, at most `limit`", () =>
    Effect.gen(function*() {
      const statistics = yield* JobStatistics
      yield* TestClock.setTime(1_000_000)
      const early = yield* finish((yield* createJob()).id)
      yield* TestClock.adjust(1_000)
      const together = yield* Effect.forEach(
        [1, 2, 3, 4, 5],
        () => Effect.flatMap(createJob(), (job) => finish(job.id))
      )
      yield* createJob()
      const byId = together.map((job) => job.id).sort()
      // The window reaches back exactly to the early job's finish.
      const all = yield* statistics.finishedWithin(Duration.millis(1_000), 100)
      expect(all.map((row) => row.jobId)).toStrictEqual([early.id, ...byId])
      expect(all[0]).toStrictEqual({
        jobId: early.id,
        jobType: "synthetic_echo",
        lifecycleStatus: "succeeded",
        startedAt: early.startedAt,
        finishedAt: early.finishedAt
      })
      expect((yield* statistics.finishedWithin(Duration.millis(999), 100)).map((row) => row.jobId)).toStrictEqual(byId)
      expect((yield* statistics.finishedWithin(Duration.millis(1_000), 3)).map((row) => row.jobId)).toStrictEqual([
        early.id,
        ...byId.slice(0, 2)
      ])
    }).pipe(Effect.provide(stack())))

  it.effect("usageByDay: calls, tokens and cost per UTC day of the last `days` days, oldest first", () =>
    Effect.gen(function*() {
      const statistics = yield* JobStatistics
      const usage = yield* UsageLog
      const day0 = Date.UTC(2026, 5, 20)
      const job = (yield* createJob()).id
      yield* TestClock.setTime(day0 + dayMs - 1)
      yield* usage.record(yield* usageRow(job, 1, 10, 100))
      yield* TestClock.setTime(day0 + dayMs)
      yield* usage.record(yield* usageRow(job, 2, 20, 200))
      yield* TestClock.setTime(day0 + 2 * dayMs + 5)
      yield* usage.record(yield* usageRow(job, 3, 30, 300))
      yield* usage.record(yield* usageRow(job, 4, 40, 400))
      yield* TestClock.setTime(day0 + 2 * dayMs + 3_600_000)
      expect(yield* statistics.usageByDay(2)).toStrictEqual([
        { day: "2026-06-21", calls: 1, totalTokens: 20, costMicros: 200 },
        { day: "2026-06-22", calls: 2, totalTokens: 70, costMicros: 700 }
      ])
      expect((yield* statistics.usageByDay(3)).map((day) => day.day)).toStrictEqual([
        "2026-06-20",
        "2026-06-21",
        "2026-06-22"
      ])
      expect((yield* statistics.usageByDay(1)).map((day) => day.calls)).toStrictEqual([2])
    }).pipe(Effect.provide(stack())))
})

describe("MemoryUsageLogRepository", () => {
  it.effect("lists a job's rows by lease, then call number", () =>
    Effect.gen(function*() {
      const usage = yield* UsageLog
      for (const [leaseNo, attemptNo] of [[2, 1], [1, 2], [2, 2], [1, 1]] as const) {
        yield* usage.record({ ...(yield* usageRow("job-1", attemptNo, 1, 1)), leaseNo })
      }
      expect((yield* usage.listByJobId("job-1")).map((row) => [row.leaseNo, row.attemptNo])).toStrictEqual([
        [1, 1],
        [1, 2],
        [2, 1],
        [2, 2]
      ])
    }).pipe(Effect.provide(stack())))
})

describe("MemoryProjectionStore", () => {
  it.effect("refuses a row whose id or unique key is taken, within one insert and across inserts; tables are separate", () =>
    Effect.gen(function*() {
      const store = yield* ProjectionStore
      const options = { uniqueBy: ["job_id", "ordinal"] }
      expect(
        yield* store.insert("cards", [
          { id: "c-1", job_id: "job-1", ordinal: 1 },
          { id: "c-2", job_id: "job-1", ordinal: 1 },
          { id: "c-3", job_id: "job-2", ordinal: 1 },
          { id: "c-1", job_id: "job-3", ordinal: 9 }
        ], options)
      ).toStrictEqual({ inserted: 2, duplicates: 2 })
      expect(
        yield* store.insert("cards", [{ id: "c-4", job_id: "job-1", ordinal: 1 }, {
          id: "c-5",
          job_id: "job-1",
          ordinal: 2
        }], options)
      )
        .toStrictEqual({ inserted: 1, duplicates: 1 })
      // Without a unique key only the id counts; another table has ids of its own.
      expect(
        yield* store.insert("notes", [{ id: "c-1", job_id: "job-1", ordinal: 1 }, {
          id: "n-2",
          job_id: "job-1",
          ordinal: 1
        }], { uniqueBy: [] })
      )
        .toStrictEqual({ inserted: 2, duplicates: 0 })
      expect((yield* store.findByJob("cards", "job-1", { orderBy: "ordinal" })).map((row) => row.id)).toStrictEqual([
        "c-1",
        "c-5"
      ])
      expect((yield* store.findByJob("notes", "job-1", { orderBy: "id" })).map((row) => row.id)).toStrictEqual([
        "c-1",
        "n-2"
      ])
      expect(yield* store.findByJob("missing", "job-1", { orderBy: "id" })).toStrictEqual([])
    }).pipe(Effect.provide(stack())))

  it.effect("orders numbers as numbers and anything else as text; stamps the time it stored a row", () =>
    Effect.gen(function*() {
      const store = yield* ProjectionStore
      yield* TestClock.setTime(5_000)
      // Enough rows that no storage order happens to be the sorted one.
      const ordinals = [10, 9, 100, 1, 55, 2, 30, 7]
      const labels = ["d", "h", "a", "f", "b", "g", "c", "e"]
      yield* store.insert(
        "cards",
        ordinals.map((ordinal, i) => ({ id: `r-${i}`, job_id: "job-1", ordinal, label: labels[i] })),
        { uniqueBy: [] }
      )
      expect((yield* store.findByJob("cards", "job-1", { orderBy: "ordinal" })).map((row) => row.ordinal))
        .toStrictEqual([1, 2, 7, 9, 10, 30, 55, 100])
      const byLabel = yield* store.findByJob("cards", "job-1", { orderBy: "label" })
      expect(byLabel.map((row) => row.label)).toStrictEqual(["a", "b", "c", "d", "e", "f", "g", "h"])
      expect(byLabel.map((row) => (row.created_at as Date).getTime())).toStrictEqual(
        Array.from({ length: 8 }, () => 5_000)
      )
    }).pipe(Effect.provide(stack())))
})

describe("MemoryQuotas", () => {
  const limited = () =>
    jobCreation(memoryRepositoriesWith({ maxActiveJobsPerUser: 100, dailyJobQuota: 2 })).pipe(Layer.orDie)

  it.effect("the daily quota starts afresh at midnight UTC, to the millisecond", () =>
    Effect.gen(function*() {
      const midnight = Date.UTC(2026, 5, 21)
      yield* TestClock.setTime(midnight - 1)
      yield* createJob()
      yield* TestClock.setTime(midnight)
      yield* createJob()
      yield* createJob()
      const third = yield* Effect.either(createJob())
      expect(Either.isLeft(third) && third.left._tag).toBe("QuotaExceeded")
      yield* TestClock.setTime(midnight + dayMs - 1)
      expect(Either.isLeft(yield* Effect.either(createJob()))).toBe(true)
      yield* TestClock.setTime(midnight + dayMs)
      expect(Either.isRight(yield* Effect.either(createJob()))).toBe(true)
    }).pipe(Effect.provide(limited())))
})
