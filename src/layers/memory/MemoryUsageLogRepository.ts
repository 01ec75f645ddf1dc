import { Effect, Either, HashMap, Layer } from "effect"
import { PersistenceError } from "../../domain/PersistenceError.js"
import { UsageLog, type UsageLogRecord } from "../../services/UsageLog.js"
import { MemoryDatabase } from "./MemoryDatabase.js"

export const makeMemoryUsageLog = Effect.gen(function*() {
  const db = yield* MemoryDatabase
  return UsageLog.of({
    record: (entry) =>
      db.write("usageLog.record", (tables, now) => {
        // The unique key (job_id, lease_no, attempt_no), as MySQL keeps it.
        for (const existing of HashMap.values(tables.aiUsageLog)) {
          if (
            existing.jobId === entry.jobId && existing.leaseNo === entry.leaseNo &&
            existing.attemptNo === entry.attemptNo
          ) {
            return Either.left(
              new PersistenceError({
                operation: "usageLog.record",
                message: "a usage row with this lease and call number exists"
              })
            )
          }
        }
        const row: UsageLogRecord = { ...entry, createdAt: now }
        return Either.right([row, { ...tables, aiUsageLog: HashMap.set(tables.aiUsageLog, row.id, row) }] as const)
      }),
    listByJobId: (jobId) =>
      db.read((tables) =>
        Array.from(HashMap.values(tables.aiUsageLog))
          .filter((row) => row.jobId === jobId)
          .sort((a, b) =>
            a.leaseNo - b.leaseNo || a.attemptNo - b.attemptNo || a.createdAt.getTime() - b.createdAt.getTime() ||
            a.id.localeCompare(b.id)
          )
      )
  })
})

export const MemoryUsageLogRepository = Layer.effect(UsageLog, makeMemoryUsageLog)
