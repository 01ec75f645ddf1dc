import { Effect, Either, HashMap, Layer, Option } from "effect"
import { JobSnapshot, type NewJobSnapshot } from "../../domain/JobSnapshot.js"
import { PersistenceError } from "../../domain/PersistenceError.js"
import { SnapshotRepository } from "../../services/SnapshotRepository.js"
import { MemoryDatabase } from "./MemoryDatabase.js"

export const makeMemorySnapshotRepository = Effect.gen(function*() {
  const db = yield* MemoryDatabase

  const create = (snapshot: NewJobSnapshot) =>
    db.write("ai_job_snapshot.create", (tables, now) => {
      // The unique key on job_id, as in the migration.
      const taken = Array.from(HashMap.values(tables.aiJobSnapshot)).some((row) => row.jobId === snapshot.jobId)
      if (taken) {
        return Either.left(
          new PersistenceError({
            operation: "ai_job_snapshot.create",
            message: `job ${snapshot.jobId} already has a snapshot`
          })
        )
      }
      const row = new JobSnapshot({ ...snapshot, createdAt: now }, { disableValidation: true })
      return Either.right(
        [undefined, { ...tables, aiJobSnapshot: HashMap.set(tables.aiJobSnapshot, row.id, row) }] as const
      )
    })

  const createMany = (snapshots: ReadonlyArray<NewJobSnapshot>) => Effect.forEach(snapshots, create, { discard: true })

  const findByJobId = (jobId: string) =>
    db.read((tables) =>
      Option.fromNullable(Array.from(HashMap.values(tables.aiJobSnapshot)).find((row) => row.jobId === jobId))
    )

  const deleteExpired = (limit: number) =>
    db.write("ai_job_snapshot.deleteExpired", (tables, now) => {
      const expired = Array.from(HashMap.values(tables.aiJobSnapshot))
        .filter((row) => row.expiresAt.getTime() < now.getTime())
        .sort((a, b) => a.expiresAt.getTime() - b.expiresAt.getTime())
        .slice(0, limit)
      const remaining = expired.reduce((map, row) => HashMap.remove(map, row.id), tables.aiJobSnapshot)
      return Either.right([expired.length, { ...tables, aiJobSnapshot: remaining }] as const)
    })

  return SnapshotRepository.of({ create, createMany, findByJobId, deleteExpired })
})

export const MemorySnapshotRepository = Layer.effect(SnapshotRepository, makeMemorySnapshotRepository)
