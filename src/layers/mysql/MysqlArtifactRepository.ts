import { SqlClient } from "@effect/sql"
import { Effect, Layer, Schema } from "effect"
import { derivedId } from "../../domain/DerivedId.js"
import { ArtifactRepository, type StoredArtifact } from "../../services/ArtifactRepository.js"
import { affectedRows, decodeRows } from "./rows.js"
import { toPersistenceError } from "./sqlErrors.js"

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
    return ArtifactRepository.of({
      record: (jobId, artifacts) =>
        artifacts.length === 0
          ? Effect.succeed({ inserted: 0, duplicates: 0 })
          : affectedRows("ai_job_artifact.record")(
            // DESIGN.md correction 7: the unique key decides; a repeated projection inserts nothing.
            sql`INSERT IGNORE INTO ai_job_artifact (id, job_id, artifact_type, artifact_id, ordinal, created_at)
                VALUES ${
              sql.csv(
                artifacts.map((artifact) =>
                  sql`(${derivedId(jobId, artifact.artifactType, artifact.artifactId)}, ${jobId}, ${artifact.artifactType},
                       ${artifact.artifactId}, ${artifact.ordinal}, UTC_TIMESTAMP(3))`
                )
              )
            }`.raw
          ).pipe(Effect.map((inserted) => ({ inserted, duplicates: artifacts.length - inserted }))),
      listByJob: (jobId) =>
        sql`SELECT * FROM ai_job_artifact WHERE job_id = ${jobId} ORDER BY ordinal, artifact_type, artifact_id`.pipe(
          Effect.mapError(toPersistenceError("ai_job_artifact.listByJob")),
          Effect.flatMap(decodeRows(StoredArtifactRow, "ai_job_artifact.listByJob")),
          Effect.map((rows): ReadonlyArray<StoredArtifact> => rows)
        )
    })
  })
)
