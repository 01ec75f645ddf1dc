import { SqlClient } from "@effect/sql"
import { Array as Arr, Effect, Layer } from "effect"
import type { NewJobSnapshot } from "../../domain/JobSnapshot.js"
import { SnapshotRepository } from "../../services/SnapshotRepository.js"
import { sqlClock } from "./sqlClock.js"
import { affectedRows, decodeJobSnapshots, toJsonText } from "./rows.js"
import { toPersistenceError } from "./sqlErrors.js"

export const makeMysqlSnapshotRepository = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const { now } = sqlClock(sql)

  const findByJobId = (jobId: string) =>
    sql`SELECT * FROM ai_job_snapshot WHERE job_id = ${jobId}`.pipe(
      Effect.mapError(toPersistenceError("ai_job_snapshot.findByJobId")),
      Effect.flatMap(decodeJobSnapshots("ai_job_snapshot.findByJobId")),
      Effect.map(Arr.head)
    )

  const create = (snapshot: NewJobSnapshot) =>
    sql`INSERT INTO ai_job_snapshot (id, job_id, content, redaction_version, expires_at, created_at)
        VALUES (${snapshot.id}, ${snapshot.jobId}, ${toJsonText(snapshot.content)}, ${snapshot.redactionVersion},
                ${snapshot.expiresAt}, ${now})`.pipe(Effect.mapError(toPersistenceError("ai_job_snapshot.create")), Effect.asVoid)

  const deleteExpired = (limit: number) =>
    affectedRows("ai_job_snapshot.deleteExpired")(
      sql`DELETE FROM ai_job_snapshot WHERE expires_at < ${now} ORDER BY expires_at LIMIT ${limit}`.raw
    )

  return SnapshotRepository.of({ create, findByJobId, deleteExpired })
})

export const MysqlSnapshotRepository = Layer.effect(SnapshotRepository, makeMysqlSnapshotRepository)
