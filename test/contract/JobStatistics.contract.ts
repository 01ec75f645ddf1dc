import { describe, expect, layer } from "@effect/vitest"
import { Duration, Effect, type Layer } from "effect"
import { leaseOf } from "../../src/domain/AiJob.js"
import { newId } from "../../src/domain/Ids.js"
import { AiJobLifecycleRepository } from "../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../src/services/AiJobService.js"
import { JobStatistics } from "../../src/services/JobStatistics.js"
import { UsageLog } from "../../src/services/UsageLog.js"

const countOf = (status: string) =>
  Effect.map(
    Effect.flatMap(JobStatistics, (statistics) => statistics.countsByTypeAndStatus),
    (counts) =>
      counts.find((count) => count.jobType === "synthetic_echo" && count.lifecycleStatus === status)?.total ?? 0
  )

const today = Effect.flatMap(JobStatistics, (statistics) => statistics.usageByDay(1)).pipe(
  Effect.map((days) => days[days.length - 1] ?? { day: "", calls: 0, totalTokens: 0, costMicros: 0 })
)

/** The operator's aggregates read the same from every store. */
export const jobStatisticsContract = (harness: {
  readonly name: string
  readonly layer: Layer.Layer<JobStatistics | UsageLog | AiJobLifecycleRepository | AiJobService, unknown>
  readonly liveClock: boolean
}) =>
  describe(`JobStatistics contract (${harness.name})`, () => {
    layer(harness.layer, { timeout: 60_000, excludeTestServices: harness.liveClock })((it) => {
      it.effect("counts by type and status, finished jobs of the window, usage of the day", () =>
        Effect.gen(function*() {
          const service = yield* AiJobService
          const lifecycle = yield* AiJobLifecycleRepository
          const statistics = yield* JobStatistics
          const usage = yield* UsageLog
          const queuedBefore = yield* countOf("queued")
          const succeededBefore = yield* countOf("succeeded")
          const usageBefore = yield* today

          const create = Effect.flatMap(newId, (id) =>
            service.createJob({
              userId: `stats-${id}`,
              jobType: "synthetic_echo",
              targetType: "test",
              targetId: "t",
              input: { message: "hi" }
            }))
          yield* create
          const { job } = yield* create
          const running = yield* lifecycle.lockJob(job.id, "stats-worker", Duration.millis(60_000))
          const lease = leaseOf(running)
          if (lease === undefined) throw new Error("locked job without a lease")
          yield* usage.record({
            id: yield* newId,
            jobId: job.id,
            leaseNo: lease.leaseNo,
            attemptNo: 1,
            credentialMode: "platform",
            provider: "synthetic",
            model: "echo-1",
            promptTokens: 10,
            completionTokens: 20,
            totalTokens: 30,
            costMicros: 1234,
            latencyMs: 5,
            errorCode: null
          })
          yield* lifecycle.markSucceeded(lease, "hash", { locked: running })

          expect(yield* countOf("queued")).toBe(queuedBefore + 1)
          expect(yield* countOf("succeeded")).toBe(succeededBefore + 1)
          const finished = (yield* statistics.finishedWithin(Duration.millis(3_600_000), 100_000)).filter((row) =>
            row.jobId === job.id
          )
          expect(finished).toHaveLength(1)
          expect(finished[0]?.lifecycleStatus).toBe("succeeded")
          expect(finished[0]?.startedAt).not.toBeNull()
          const usageAfter = yield* today
          expect(usageAfter.day).toMatch(/^\d{4}-\d{2}-\d{2}$/)
          expect({
            calls: usageAfter.calls - usageBefore.calls,
            totalTokens: usageAfter.totalTokens - usageBefore.totalTokens,
            costMicros: usageAfter.costMicros - usageBefore.costMicros
          }).toStrictEqual({ calls: 1, totalTokens: 30, costMicros: 1234 })
        }))
    })
  })
