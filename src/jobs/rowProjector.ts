import { Effect, Schema } from "effect"
import type { AiJob } from "../domain/AiJob.js"
import { derivedId } from "../domain/DerivedId.js"
import { ValidationError } from "../domain/ExecutionError.js"
import { failedPaths, formatProblems } from "../domain/JobType.js"
import { PersistenceError } from "../domain/PersistenceError.js"
import { ProjectionStore, type ProjectionValue } from "../services/ProjectionStore.js"
import type { ResultProjector } from "../services/ResultProjectors.js"

/** A business row before the projector stamps its `id` and `job_id`. */
export type RowValues = Readonly<Record<string, ProjectionValue>>

/**
 * A projector that writes one business table: the output becomes rows, each row one artifact.
 * Row ids derive from (job, table, position), so a repeated projection finds its rows already
 * there (the table's unique key skips them) and reports the projection as a duplicate.
 */
export const rowProjector = <O, OE, R extends Readonly<Record<string, unknown>>, RE>(spec: {
  readonly key: string
  readonly output: Schema.Schema<O, OE>
  readonly table: string
  /** The table's unique key (besides `id`), as in its migration. */
  readonly uniqueBy: ReadonlyArray<string>
  readonly jsonColumns?: ReadonlyArray<string>
  readonly orderBy: string
  readonly artifactType: string
  readonly rows: (job: AiJob, output: O) => ReadonlyArray<RowValues>
  /** How the API shows one stored row (decoded from its SQL column names). */
  readonly record: Schema.Schema<R, RE>
}): Effect.Effect<ResultProjector, never, ProjectionStore> =>
  Effect.gen(function*() {
    const store = yield* ProjectionStore
    const decodeOutput = Schema.decodeUnknown(spec.output)
    const decodeRecord = Schema.decodeUnknown(spec.record)
    const jsonColumns = spec.jsonColumns ?? []

    const project: ResultProjector["project"] = (job, validatedOutput) =>
      Effect.gen(function*() {
        const output = yield* decodeOutput(validatedOutput).pipe(
          Effect.mapError((error) =>
            new ValidationError({
              code: "VALIDATION_OUTPUT_SCHEMA",
              message: `projector ${spec.key}: output does not decode`,
              problems: formatProblems(error)
            })
          )
        )
        const rows = spec.rows(job, output).map((values, position) => ({
          ...values,
          id: derivedId(job.id, spec.table, String(position)),
          job_id: job.id
        }))
        const { inserted } = yield* store.insert(spec.table, rows, { uniqueBy: spec.uniqueBy, jsonColumns })
        return {
          artifacts: rows.map((row, ordinal) => ({ artifactType: spec.artifactType, artifactId: row.id, ordinal })),
          duplicate: rows.length > 0 && inserted === 0
        }
      })

    const records: ResultProjector["records"] = (job) =>
      store.findByJob(spec.table, job.id, { orderBy: spec.orderBy, jsonColumns }).pipe(
        Effect.flatMap((rows) =>
          Effect.forEach(rows, (row) =>
            decodeRecord(row).pipe(
              Effect.mapError((error) =>
                new PersistenceError({
                  operation: `${spec.table}.records`,
                  message: `row does not decode at ${failedPaths(error)}`
                })
              )
            ))
        )
      )

    return { key: spec.key, project, records }
  })
