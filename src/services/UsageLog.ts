import { Context, type Effect, Schema } from "effect"
import type { PersistenceError } from "../domain/PersistenceError.js"

/** A number column: mysql2 may hand BIGINT back as a string. */
const IntColumn = Schema.Union(Schema.Number, Schema.NumberFromString)

/** One row of `ai_usage_log` (ADR 5.7), camelCased; also the memory store's `UsageLogRow`. */
export const UsageLogRecord = Schema.Struct({
  id: Schema.String,
  jobId: Schema.String,
  attemptNo: IntColumn,
  credentialMode: Schema.String,
  provider: Schema.String,
  model: Schema.String,
  promptTokens: IntColumn,
  completionTokens: IntColumn,
  totalTokens: IntColumn,
  costMicros: IntColumn,
  latencyMs: IntColumn,
  errorCode: Schema.NullOr(Schema.String),
  createdAt: Schema.DateFromSelf
})
export type UsageLogRecord = typeof UsageLogRecord.Type

/** What a caller records; the store sets `createdAt` from its clock. */
export type NewUsageLogEntry = Omit<UsageLogRecord, "createdAt">

/**
 * ADR 5.7 AiUsageLogService: one row per provider call, failed calls included (tokens 0 and
 * `errorCode` set). Cost comes from `AiCostCalculator.costMicros`.
 */
export class UsageLog extends Context.Tag("ai-job-engine/UsageLog")<
  UsageLog,
  {
    readonly record: (entry: NewUsageLogEntry) => Effect.Effect<UsageLogRecord, PersistenceError>
    /** Oldest attempt first. */
    readonly listByJobId: (jobId: string) => Effect.Effect<ReadonlyArray<UsageLogRecord>, PersistenceError>
  }
>() {}
