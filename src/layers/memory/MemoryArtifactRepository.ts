import { Effect, Either, HashMap, Layer, Option } from "effect"
import { derivedId } from "../../domain/DerivedId.js"
import { ArtifactRepository } from "../../services/ArtifactRepository.js"
import { MemoryDatabase, type MemoryTables } from "./MemoryDatabase.js"

const artifactsOf = (tables: MemoryTables, jobId: string) =>
  Array.from(HashMap.values(tables.aiJobArtifact))
    .filter((artifact) => artifact.jobId === jobId)
    .sort((a, b) =>
      a.ordinal - b.ordinal || a.artifactType.localeCompare(b.artifactType) || a.artifactId.localeCompare(b.artifactId)
    )

export const MemoryArtifactRepository = Layer.effect(
  ArtifactRepository,
  Effect.gen(function*() {
    const db = yield* MemoryDatabase
    return ArtifactRepository.of({
      record: (jobId, artifacts) =>
        db.write("ai_job_artifact.record", (tables, now) => {
          let table = tables.aiJobArtifact
          let inserted = 0
          for (const artifact of artifacts) {
            // The unique key (job, type, artifact id) is the derived primary key.
            const id = derivedId(jobId, artifact.artifactType, artifact.artifactId)
            if (HashMap.has(table, id)) continue
            table = HashMap.set(table, id, { id, jobId, ...artifact, createdAt: now })
            inserted += 1
          }
          return Either.right(
            [{ inserted, duplicates: artifacts.length - inserted }, { ...tables, aiJobArtifact: table }] as const
          )
        }),
      listByJob: (jobId) => db.read((tables) => artifactsOf(tables, jobId)),
      findJobWithArtifacts: (jobId) =>
        db.read((tables) =>
          Option.map(HashMap.get(tables.aiJob, jobId), (job) => ({
            job,
            artifacts: job.lifecycleStatus === "succeeded" ? artifactsOf(tables, jobId) : []
          }))
        )
    })
  })
)
