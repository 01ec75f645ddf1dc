import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Layer, Schema } from "effect"
import type { NewJobSnapshot } from "../../domain/JobSnapshot.js"
import { SnapshotRepository } from "../../services/SnapshotRepository.js"
import { changedRows, JobSnapshotRow, NewJobSnapshotRow } from "./rows.js"
import { sqlClock } from "./sqlClock.js"
import { persistence } from "./sqlErrors.js"
import { insertRows } from "./statementShapes.js"

export const makeMysqlSnapshotRepository = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { now } = sqlClock(sql)

  const findSnapshot = SqlSchema.findOne({
    Request: Schema.String,
    Result: JobSnapshotRow,
    execute: (jobId) => sql`SELECT * FROM ai_job_snapshot WHERE job_id = ${jobId}`
  })
  const insertSnapshot = SqlSchema.void({
    Request: NewJobSnapshotRow,
    // `created_at` is the database clock's expression, which `sql.insert` cannot bind: `INSERT ... SET`.
    execute: (row) => sql`INSERT INTO ai_job_snapshot SET ${sql.update(row)}, created_at = ${now}`
  })

  const insertSnapshots = SqlSchema.void({
    Request: Schema.Array(NewJobSnapshotRow),
    execute: (rows) => insertRows(sql, "ai_job_snapshot", rows, [["created_at", now]])
  })

  const createMany = (snapshots: ReadonlyArray<NewJobSnapshot>) =>
    snapshots.length === 0 ? Effect.void : insertSnapshots(snapshots).pipe(persistence("ai_job_snapshot.createMany"))

  const findByJobId = (jobId: string) => findSnapshot(jobId).pipe(persistence("ai_job_snapshot.findByJobId"))

  const create = (snapshot: NewJobSnapshot) => insertSnapshot(snapshot).pipe(persistence("ai_job_snapshot.create"))

  const deleteExpired = (limit: number) =>
    changedRows(sql`DELETE FROM ai_job_snapshot WHERE expires_at < ${now} ORDER BY expires_at LIMIT ${limit}`.raw).pipe(
      persistence("ai_job_snapshot.deleteExpired")
    )

  return SnapshotRepository.of({ create, createMany, findByJobId, deleteExpired })
})

export const MysqlSnapshotRepository = Layer.effect(SnapshotRepository, makeMysqlSnapshotRepository)
