import { SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { AiJob } from "../../../domain/AiJob.js"
import type { NewAiJob } from "../../../domain/AiJob.js"
import type { JobBatchRecord } from "../../../domain/JobBatch.js"
import { DuplicateIdempotencyKey } from "../../../domain/JobCreationErrors.js"
import { type AiJobLifecycleRepository, queuedJobFields } from "../../../services/AiJobLifecycleRepository.js"
import { JobBatchRow, NewAiJobRow } from "../rows.js"
import { isDuplicateKey, persistence } from "../sqlErrors.js"
import { insertRows } from "../statementShapes.js"
import { clockDate, type LifecycleShared } from "./shared.js"

/** A unique key refused the row: `DuplicateIdempotencyKey`, naming the key the row carried. */
const duplicateKeyOf =
  (job: { readonly userId: string; readonly jobType: string; readonly idempotencyKey: string | null }) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | DuplicateIdempotencyKey, R> =>
    Effect.catchIf(self, (error: E) => isDuplicateKey(error), () =>
      Effect.fail(
        new DuplicateIdempotencyKey({
          userId: job.userId,
          jobType: job.jobType,
          idempotencyKey: job.idempotencyKey ?? ""
        })
      ))

/** New jobs and batches: inserts whose unique keys are the idempotency keys. */
export const makeLifecycleCreation = (
  { now, sql }: LifecycleShared
): Pick<AiJobLifecycleRepository["Type"], "createJob" | "createJobs" | "recordBatch"> => {
  const insertJob = SqlSchema.void({
    Request: Schema.Struct({ row: NewAiJobRow, at: Schema.DateFromSelf }),
    // The creation time is bound (not the server's clock) so the new row needs no read-back; it
    // is no lease time. MySQL's `INSERT ... SET`, column names from the row's keys.
    execute: ({ at, row }) => sql`INSERT INTO ai_job SET ${sql.update(row)}, created_at = ${at}, updated_at = ${at}`
  })
  const insertJobs = SqlSchema.void({
    Request: Schema.Struct({ rows: Schema.Array(NewAiJobRow), at: Schema.DateFromSelf }),
    execute: ({ at, rows }) => insertRows(sql, "ai_job", rows, [["created_at", sql`${at}`], ["updated_at", sql`${at}`]])
  })
  const insertBatch = SqlSchema.void({
    Request: JobBatchRow,
    execute: (row) => sql`INSERT INTO ai_job_batch SET ${sql.update(row)}, created_at = ${now}`
  })

  const createJob = (job: NewAiJob) =>
    Effect.flatMap(clockDate, (at) => {
      const row = queuedJobFields(job)
      return insertJob({ row, at }).pipe(
        Effect.as(new AiJob({ ...row, createdAt: at, updatedAt: at }, { disableValidation: true }))
      )
    }).pipe(duplicateKeyOf(job), persistence("ai_job.create"))

  const createJobs = (jobs: ReadonlyArray<NewAiJob>) =>
    Effect.flatMap(clockDate, (at) => {
      const rows = jobs.map(queuedJobFields)
      return insertJobs({ rows, at }).pipe(
        Effect.as(rows.map((row) => new AiJob({ ...row, createdAt: at, updatedAt: at }, { disableValidation: true })))
      )
    }).pipe(
      // Only a job with a key can collide; name the first such job.
      duplicateKeyOf(
        jobs.find((job) => job.idempotencyKey !== null) ?? { userId: "", jobType: "", idempotencyKey: null }
      ),
      persistence("ai_job.createMany")
    )

  const recordBatch = (batch: JobBatchRecord) =>
    insertBatch(batch).pipe(duplicateKeyOf(batch), persistence("ai_job_batch.create"))

  return { createJob, createJobs, recordBatch }
}
