import { Context, type Effect } from "effect"
import type { PersistenceError } from "../domain/PersistenceError.js"

export type ProjectionValue = string | number | boolean | null | Date | ReadonlyArray<string>

/** A business row: `id` and `job_id` always, the table's other columns by their SQL names. */
export type ProjectionRow = Readonly<Record<string, ProjectionValue>> & { readonly id: string; readonly job_id: string }

/**
 * The business tables projectors write (`flashcard`, `learning_evaluation`, ...), behind one
 * generic service so a new job type needs a projector and a migration, not a repository.
 * Idempotency rests on each table's unique keys (docs/architecture.md §11.3): a row whose unique
 * key already holds a row is skipped and counted as a duplicate.
 */
export class ProjectionStore extends Context.Tag("ai-job-engine/ProjectionStore")<
  ProjectionStore,
  {
    readonly insert: (
      table: string,
      rows: ReadonlyArray<ProjectionRow>,
      options: {
        /** The columns of the table's unique key besides the primary key (the memory store enforces it). */
        readonly uniqueBy: ReadonlyArray<string>
        /** Columns holding JSON (arrays) rather than scalars. */
        readonly jsonColumns?: ReadonlyArray<string>
      }
    ) => Effect.Effect<{ readonly inserted: number; readonly duplicates: number }, PersistenceError>
    /** A job's rows of `table`, ordered by `orderBy`; JSON columns decoded. */
    readonly findByJob: (
      table: string,
      jobId: string,
      options: { readonly orderBy: string; readonly jsonColumns?: ReadonlyArray<string> }
    ) => Effect.Effect<ReadonlyArray<Readonly<Record<string, unknown>>>, PersistenceError>
  }
>() {}
