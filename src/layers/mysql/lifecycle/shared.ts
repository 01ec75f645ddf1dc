import type { SqlClient } from "@effect/sql"
import { SqlSchema } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { isFragment } from "@effect/sql/Statement"
import { Clock, Effect, Either, type Option, Schema } from "effect"
import type { AiJob, JobLease } from "../../../domain/AiJob.js"
import { legacyStatusOf, type LifecycleStatus } from "../../../domain/LifecycleStatus.js"
import { PersistenceError } from "../../../domain/PersistenceError.js"
import { AiJobRow, changedRows } from "../rows.js"
import { sqlClock } from "../sqlClock.js"
import { persistence } from "../sqlErrors.js"

/** The rest of a `SELECT * FROM ai_job` (its WHERE, ORDER BY, LIMIT), for the lists whose clauses vary. */
export const SqlTail = Schema.declare(isFragment)

/**
 * When a compare-and-set matched nothing, the guards are asked why with a clock at the end of
 * time: the database's own clock already judged expiry, so only the other reasons (missing,
 * wrong state, another owner or attempt, attempts used up) are named; a refusal for time
 * alone falls through to the race error.
 */
export const endOfTime = new Date(8.64e15)

/** Effect's Clock at DATETIME(3) precision: what the column stores is what the caller gets. */
export const clockDate = Effect.map(Clock.currentTimeMillis, (millis) => new Date(Math.floor(millis)))

/**
 * What the parts of the lifecycle repository share: the database's clock, the rows read by id
 * or by a tail of clauses, and the compare-and-set every state change goes through. Built once, with the layer.
 */
export const makeLifecycleShared = (sql: SqlClient.SqlClient) => {
  const { now, nowMinus, nowPlus } = sqlClock(sql)
  const status = (to: LifecycleStatus) => sql`lifecycle_status = ${to}, status = ${legacyStatusOf[to]}`

  const byId = {
    Request: Schema.String,
    Result: AiJobRow,
    execute: (jobId: string) => sql`SELECT * FROM ai_job WHERE id = ${jobId}`
  }
  const findJob = SqlSchema.findOne(byId)
  const singleJob = SqlSchema.single(byId)
  const selectJobs = SqlSchema.findAll({
    Request: SqlTail,
    Result: AiJobRow,
    execute: (tail) => sql`SELECT * FROM ai_job ${tail}`
  })

  const findById = (jobId: string) => findJob(jobId).pipe(persistence("ai_job.findById"))

  const mustFind = (operation: string, jobId: string) =>
    singleJob(jobId).pipe(
      Effect.catchTag("NoSuchElementException", () =>
        Effect.fail(new PersistenceError({ operation, message: `job ${jobId} vanished after its update` }))),
      persistence(operation)
    )

  /** Runs a compare-and-set; on no match, reads the row and fails with the guard's reason. */
  const compareAndSet = <E>(
    operation: string,
    jobId: string,
    update: Effect.Effect<unknown, SqlError>,
    whyRefused: (current: Option.Option<AiJob>) => Either.Either<AiJob, E>,
    raced: () => E
  ): Effect.Effect<AiJob, E | PersistenceError> =>
    Effect.gen(function*() {
      const changed = yield* changedRows(update).pipe(persistence(operation))
      if (changed > 0) return yield* mustFind(operation, jobId)
      const current = yield* findById(jobId)
      return yield* Either.match(whyRefused(current), {
        onLeft: (error) => Effect.fail(error),
        // The row now satisfies the condition although our update matched nothing: another
        // writer moved it in between. Report it as the race it was.
        onRight: () => Effect.fail(raced())
      })
    })

  const leaseWhere = (lease: JobLease) =>
    sql`id = ${lease.jobId} AND lifecycle_status = 'running' AND locked_by = ${lease.workerId} AND lease_no = ${lease.leaseNo}`

  return { sql, now, nowPlus, nowMinus, status, selectJobs, findById, mustFind, compareAndSet, leaseWhere }
}

export type LifecycleShared = ReturnType<typeof makeLifecycleShared>
