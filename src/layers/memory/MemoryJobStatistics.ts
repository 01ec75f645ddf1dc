import { Duration, Effect, HashMap, Layer } from "effect"
import { isTerminal } from "../../domain/LifecycleStatus.js"
import { type FinishedJob, JobStatistics, type TypeStatusCount, type UsageDay } from "../../services/JobStatistics.js"
import { MemoryDatabase } from "./MemoryDatabase.js"

const dayMs = 86_400_000
const utcDay = (time: Date) => time.toISOString().slice(0, 10)

/** The operator's aggregates over the memory store, by the store's clock. */
export const makeMemoryJobStatistics = Effect.gen(function*() {
  const db = yield* MemoryDatabase
  return JobStatistics.of({
    countsByTypeAndStatus: db.read((tables) => {
      const totals = new Map<string, TypeStatusCount>()
      for (const job of HashMap.values(tables.aiJob)) {
        const key = `${job.jobType}\u0000${job.lifecycleStatus}`
        const known = totals.get(key)
        totals.set(key, { jobType: job.jobType, lifecycleStatus: job.lifecycleStatus, total: (known?.total ?? 0) + 1 })
      }
      return Array.from(totals.values())
    }),
    finishedWithin: (window, limit) =>
      db.read((tables, now) =>
        Array.from(HashMap.values(tables.aiJob))
          .flatMap((job): ReadonlyArray<FinishedJob> =>
            isTerminal(job.lifecycleStatus) && job.finishedAt !== null &&
              job.finishedAt.getTime() >= now.getTime() - Duration.toMillis(window)
              ? [{
                jobId: job.id,
                jobType: job.jobType,
                lifecycleStatus: job.lifecycleStatus,
                startedAt: job.startedAt,
                finishedAt: job.finishedAt
              }]
              : []
          )
          // As MySQL's `ORDER BY finished_at, id`: the limit cuts the same rows from equal times.
          .sort((a, b) =>
            a.finishedAt.getTime() - b.finishedAt.getTime() || (a.jobId < b.jobId ? -1 : a.jobId > b.jobId ? 1 : 0)
          )
          .slice(0, limit)
      ),
    usageByDay: (days) =>
      db.read((tables, now) => {
        const first = utcDay(new Date(now.getTime() - (days - 1) * dayMs))
        const byDay = new Map<string, UsageDay>()
        for (const row of HashMap.values(tables.aiUsageLog)) {
          const day = utcDay(row.createdAt)
          if (day < first) continue
          const known = byDay.get(day) ?? { day, calls: 0, totalTokens: 0, costMicros: 0 }
          byDay.set(day, {
            day,
            calls: known.calls + 1,
            totalTokens: known.totalTokens + row.totalTokens,
            costMicros: known.costMicros + row.costMicros
          })
        }
        return Array.from(byDay.values()).sort((a, b) => a.day.localeCompare(b.day))
      })
  })
})

export const MemoryJobStatistics = Layer.effect(JobStatistics, makeMemoryJobStatistics)
