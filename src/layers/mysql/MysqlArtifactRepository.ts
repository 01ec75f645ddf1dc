import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Layer, Option, Schema } from "effect"
import { AiJob } from "../../domain/AiJob.js"
import { derivedId } from "../../domain/DerivedId.js"
import { ArtifactRepository } from "../../services/ArtifactRepository.js"
import { AiJobColumns, changedRows } from "./rows.js"
import { sqlClock } from "./sqlClock.js"
import { persistence } from "./sqlErrors.js"

const StoredArtifactRow = Schema.Struct({
  id: Schema.String,
  jobId: Schema.String,
  artifactType: Schema.String,
  artifactId: Schema.String,
  ordinal: Schema.Number,
  createdAt: Schema.DateFromSelf
})

/** A job row with one of its artifacts (all NULL when it has none, or did not succeed). */
const JobWithArtifactRow = Schema.Struct({
  ...AiJobColumns.fields,
  artifactRowId: Schema.NullOr(Schema.String),
  artifactType: Schema.NullOr(Schema.String),
  artifactId: Schema.NullOr(Schema.String),
  ordinal: Schema.NullOr(Schema.Number),
  artifactCreatedAt: Schema.NullOr(Schema.DateFromSelf)
})

export const MysqlArtifactRepository = Layer.effect(
  ArtifactRepository,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { now } = sqlClock(sql)
    const listArtifacts = SqlSchema.findAll({
      Request: Schema.String,
      Result: StoredArtifactRow,
      execute: (jobId) =>
        sql`SELECT * FROM ai_job_artifact WHERE job_id = ${jobId} ORDER BY ordinal, artifact_type, artifact_id`
    })
    const findJoined = SqlSchema.findAll({
      Request: Schema.String,
      Result: JobWithArtifactRow,
      execute: (jobId) =>
        sql`SELECT j.*, a.id AS artifact_row_id, a.artifact_type, a.artifact_id, a.ordinal, a.created_at AS artifact_created_at
            FROM ai_job j
            LEFT JOIN ai_job_artifact a ON a.job_id = j.id AND j.lifecycle_status = 'succeeded'
            WHERE j.id = ${jobId}
            ORDER BY a.ordinal, a.artifact_type, a.artifact_id`
    })
    const findJobWithArtifacts = (jobId: string) =>
      findJoined(jobId).pipe(
        Effect.map((rows) => {
          const first = rows[0]
          if (first === undefined) return Option.none()
          const {
            artifactCreatedAt: _c,
            artifactId: _i,
            artifactRowId: _r,
            artifactType: _t,
            ordinal: _o,
            ...columns
          } = first
          const artifacts = rows.flatMap((row) =>
            row.artifactRowId === null || row.artifactType === null || row.artifactId === null ||
              row.ordinal === null ||
              row.artifactCreatedAt === null
              ? []
              : [{
                id: row.artifactRowId,
                jobId,
                artifactType: row.artifactType,
                artifactId: row.artifactId,
                ordinal: row.ordinal,
                createdAt: row.artifactCreatedAt
              }]
          )
          // The columns were decoded just above: no second validation for the class.
          return Option.some({ job: new AiJob(columns, { disableValidation: true }), artifacts })
        }),
        persistence("ai_job_artifact.findJobWithArtifacts")
      )
    return ArtifactRepository.of({
      findJobWithArtifacts,
      record: (jobId, artifacts) =>
        artifacts.length === 0
          ? Effect.succeed({ inserted: 0, duplicates: 0 })
          : changedRows(
            // The unique key decides: a repeated projection inserts nothing.
            // Several rows, each stamped by the database clock, which `sql.insert` cannot bind.
            sql`INSERT IGNORE INTO ai_job_artifact (id, job_id, artifact_type, artifact_id, ordinal, created_at)
                VALUES ${
              sql.csv(
                artifacts.map((artifact) =>
                  sql`(${
                    derivedId(jobId, artifact.artifactType, artifact.artifactId)
                  }, ${jobId}, ${artifact.artifactType},
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
