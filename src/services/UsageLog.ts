import { Context, type Effect, Schema } from "effect"
import type { PersistenceError } from "../domain/PersistenceError.js"

/** A number column: mysql2 may hand BIGINT back as a string. */
const IntColumn = Schema.Union(Schema.Number, Schema.NumberFromString)

/** One row of `ai_usage_log`, camelCased; also the memory store's `UsageLogRow`. */
export const UsageLogRecord = Schema.Struct({
  id: Schema.String,
  jobId: Schema.String,
  /** The job lease the call was made in (`ai_job.lease_no`); negative for rows older than lease numbers. */
  leaseNo: IntColumn,
  /** The call's number within its lease (1 + the engine's retries); unique per job with `leaseNo`. */
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
  /** The answer reported no usage: the tokens (and the cost) are the engine's estimate. Absent (NULL) when reported. */
  usageEstimated: Schema.optionalWith(Schema.transformLiteral(1, true), { nullable: true }),
  createdAt: Schema.DateFromSelf
})
export type UsageLogRecord = typeof UsageLogRecord.Type

/** What a caller records; the store sets `createdAt` from its clock. */
export type NewUsageLogEntry = Omit<UsageLogRecord, "createdAt">

/**
 * The usage log: one row per provider call, failed calls included (tokens 0 and
 * `errorCode` set). Cost comes from `AiCostCalculator.costMicros`.
 */
export class UsageLog extends Context.Tag("ai-job-engine/UsageLog")<
  UsageLog,
  {
    /** Fails (a `PersistenceError`) when the job already has a row for this lease and call number. */
    readonly record: (entry: NewUsageLogEntry) => Effect.Effect<UsageLogRecord, PersistenceError>
    /** Oldest lease first, then by call number. */
    readonly listByJobId: (jobId: string) => Effect.Effect<ReadonlyArray<UsageLogRecord>, PersistenceError>
  }
>() {}
