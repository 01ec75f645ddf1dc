import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Layer, Schema } from "effect"
import { derivedId } from "../../domain/DerivedId.js"
import { ArtifactRepository } from "../../services/ArtifactRepository.js"
import { sqlClock } from "./sqlClock.js"
import { changedRows } from "./rows.js"
import { persistence } from "./sqlErrors.js"

const StoredArtifactRow = Schema.Struct({
  id: Schema.String,
  jobId: Schema.String,
  artifactType: Schema.String,
  artifactId: Schema.String,
  ordinal: Schema.Number,
  createdAt: Schema.DateFromSelf
})

export const MysqlArtifactRepository = Layer.effect(
  ArtifactRepository,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const { now } = sqlClock(sql)
    const listArtifacts = SqlSchema.findAll({
      Request: Schema.String,
      Result: StoredArtifactRow,
      execute: (jobId) => sql`SELECT * FROM ai_job_artifact WHERE job_id = ${jobId} ORDER BY ordinal, artifact_type, artifact_id`
    })
    return ArtifactRepository.of({
      record: (jobId, artifacts) =>
        artifacts.length === 0
          ? Effect.succeed({ inserted: 0, duplicates: 0 })
          : changedRows(
            // The unique key decides: a repeated projection inserts nothing (docs/architecture.md §11.3).
            // Several rows, each stamped by the database clock, which `sql.insert` cannot bind.
            sql`INSERT IGNORE INTO ai_job_artifact (id, job_id, artifact_type, artifact_id, ordinal, created_at)
                VALUES ${
              sql.csv(
                artifacts.map((artifact) =>
                  sql`(${derivedId(jobId, artifact.artifactType, artifact.artifactId)}, ${jobId}, ${artifact.artifactType},
                       ${artifact.artifactId}, ${artifact.ordinal}, ${now})`
                )
              )
            }`.raw
          ).pipe(
            persistence("ai_job_artifact.record"),
            Effect.map((inserted) => ({ inserted, duplicates: artifacts.length - inserted }))
          ),
      listByJob: (jobId) => listArtifacts(jobId).pipe(persistence("ai_job_artifact.listByJob"))
    })
  })
)
