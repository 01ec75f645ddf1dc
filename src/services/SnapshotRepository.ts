import { Context, type Effect, type Option } from "effect"
import type { JobSnapshot, NewJobSnapshot } from "../domain/JobSnapshot.js"
import type { PersistenceError } from "../domain/PersistenceError.js"

/** `ai_job_snapshot`: the frozen input a job runs on. */
export class SnapshotRepository extends Context.Tag("ai-job-engine/SnapshotRepository")<
  SnapshotRepository,
  {
    /** Call inside `UnitOfWork.transaction`, beside the job it belongs to. */
    readonly create: (snapshot: NewJobSnapshot) => Effect.Effect<void, PersistenceError>
    /** Many jobs' snapshots in one statement (a batch create), inside the same transaction. */
    readonly createMany: (snapshots: ReadonlyArray<NewJobSnapshot>) => Effect.Effect<void, PersistenceError>
    readonly findByJobId: (jobId: string) => Effect.Effect<Option.Option<JobSnapshot>, PersistenceError>
    /** Deletes up to `limit` snapshots whose `expires_at` has passed; returns how many. */
    readonly deleteExpired: (limit: number) => Effect.Effect<number, PersistenceError>
  }
>() {}
