import { SqlSchema } from "@effect/sql"
import type { Fragment } from "@effect/sql/Statement"
import { Effect, Option, Schema } from "effect"
import type { LifecycleStatus } from "../../../domain/LifecycleStatus.js"
import type { AiJobLifecycleRepository } from "../../../services/AiJobLifecycleRepository.js"
import { AiJobRow, JobBatchRow, Total } from "../rows.js"
import { persistence } from "../sqlErrors.js"
import { paddedForIn } from "../statementShapes.js"
import { type LifecycleShared, SqlTail } from "./shared.js"

/** The reads: jobs and batches by id or key, the operators' lists, the quotas' counts. */
export const makeLifecycleQueries = (
  { findById, selectJobs, sql }: LifecycleShared
): Pick<
  AiJobLifecycleRepository["Type"],
  | "findById"
  | "findByIds"
  | "findByIdempotencyKey"
  | "findBatchByIdempotencyKey"
  | "findRetriesOf"
  | "findByLifecycleStatus"
  | "list"
  | "countActive"
  | "countCreatedSince"
> => {
  const findJobByIdempotencyKey = SqlSchema.findOne({
    Request: Schema.Struct({ userId: Schema.String, jobType: Schema.String, idempotencyKey: Schema.String }),
    Result: AiJobRow,
    execute: (key) =>
      sql`SELECT * FROM ai_job WHERE user_id = ${key.userId} AND job_type = ${key.jobType} AND idempotency_key = ${key.idempotencyKey}`
  })
  const selectJobsByIds = SqlSchema.findAll({
    Request: Schema.Array(Schema.String),
    Result: AiJobRow,
    execute: (ids) => sql`SELECT * FROM ai_job WHERE id IN ${sql.in(paddedForIn(ids))}`
  })
  const findBatchByKey = SqlSchema.findOne({
    Request: Schema.Struct({ userId: Schema.String, jobType: Schema.String, idempotencyKey: Schema.String }),
    Result: JobBatchRow,
    execute: (key) =>
      sql`SELECT id, user_id, job_type, idempotency_key, request_hash, job_ids FROM ai_job_batch
          WHERE user_id = ${key.userId} AND job_type = ${key.jobType} AND idempotency_key = ${key.idempotencyKey}`
  })
  const countWhere = SqlSchema.findOne({
    Request: SqlTail,
    Result: Total,
    execute: (where) => sql`SELECT COUNT(*) AS total FROM ai_job WHERE ${where}`
  })

  const findByIds = (jobIds: ReadonlyArray<string>) =>
    jobIds.length === 0
      ? Effect.succeed([])
      : selectJobsByIds(jobIds).pipe(
        Effect.map((found) => {
          const byId = new Map(found.map((job) => [job.id, job]))
          return jobIds.flatMap((id) => byId.get(id) ?? [])
        }),
        persistence("ai_job.findByIds")
      )

  const findBatchByIdempotencyKey = (userId: string, jobType: string, idempotencyKey: string) =>
    findBatchByKey({ userId, jobType, idempotencyKey }).pipe(persistence("ai_job_batch.findByIdempotencyKey"))

  const findByIdempotencyKey = (userId: string, jobType: string, idempotencyKey: string) =>
    findJobByIdempotencyKey({ userId, jobType, idempotencyKey }).pipe(persistence("ai_job.findByIdempotencyKey"))

  const findByLifecycleStatus = (
    statuses: ReadonlyArray<LifecycleStatus>,
    options: { readonly queueName?: string; readonly limit?: number } = {}
  ) =>
    statuses.length === 0
      ? Effect.succeed([])
      : selectJobs(
        sql`WHERE lifecycle_status IN ${sql.in(statuses)}
            ${options.queueName === undefined ? sql`` : sql`AND queue_name = ${options.queueName}`}
            ORDER BY created_at, id LIMIT ${options.limit ?? 100}`
      ).pipe(persistence("ai_job.findByLifecycleStatus"))

  const findRetriesOf = (jobId: string) =>
    selectJobs(sql`WHERE retried_from_job_id = ${jobId} ORDER BY created_at, id`).pipe(
      persistence("ai_job.findRetriesOf")
    )

  const list: AiJobLifecycleRepository["Type"]["list"] = (filter, page) => {
    const clauses: Array<Fragment> = []
    if (filter.userId !== undefined) clauses.push(sql`user_id = ${filter.userId}`)
    if (filter.jobType !== undefined) clauses.push(sql`job_type = ${filter.jobType}`)
    if (filter.statuses !== undefined && filter.statuses.length > 0) {
      clauses.push(sql`lifecycle_status IN ${sql.in(filter.statuses)}`)
    }
    if (filter.queueName !== undefined) clauses.push(sql`queue_name = ${filter.queueName}`)
    if (filter.createdFrom !== undefined) clauses.push(sql`created_at >= ${filter.createdFrom}`)
    if (filter.createdTo !== undefined) clauses.push(sql`created_at < ${filter.createdTo}`)
    if (page.after !== undefined) {
      clauses.push(
        sql`(created_at < ${page.after.createdAt} OR (created_at = ${page.after.createdAt} AND id < ${page.after.id}))`
      )
    }
    const where = clauses.length === 0 ? sql`` : sql`WHERE ${sql.and(clauses)}`
    return selectJobs(sql`${where} ORDER BY created_at DESC, id DESC LIMIT ${page.limit}`).pipe(
      persistence("ai_job.list")
    )
  }

  const count = (operation: string, where: Fragment) =>
    countWhere(where).pipe(
      persistence(operation),
      Effect.map(Option.match({ onNone: () => 0, onSome: (row) => row.total }))
    )

  return {
    findById,
    findByIds,
    findByIdempotencyKey,
    findBatchByIdempotencyKey,
    findRetriesOf,
    findByLifecycleStatus,
    list,
    countActive: (userId) =>
      count("ai_job.countActive", sql`user_id = ${userId} AND lifecycle_status IN ('queued', 'running')`),
    countCreatedSince: (userId, since) =>
      count("ai_job.countCreatedSince", sql`user_id = ${userId} AND created_at >= ${since}`)
  }
}
