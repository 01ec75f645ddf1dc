import type { SqlError } from "@effect/sql/SqlError"
import { Effect, ParseResult, Schema } from "effect"
import { AiJob } from "../../domain/AiJob.js"
import { JobSnapshot } from "../../domain/JobSnapshot.js"
import { OutboxEvent } from "../../domain/OutboxEvent.js"
import { PersistenceError } from "../../domain/PersistenceError.js"
import { toPersistenceError } from "./sqlErrors.js"
import { failedPaths } from "../../domain/JobType.js"

/**
 * A JSON column: MySQL 8 hands it over parsed, MariaDB (where JSON is LONGTEXT) as a string.
 * Encoding always writes the JSON text.
 */
export const JsonColumn = Schema.transformOrFail(Schema.Unknown, Schema.Unknown, {
  strict: true,
  decode: (value, _, ast) =>
    typeof value === "string"
      ? ParseResult.try({
        try: () => JSON.parse(value),
        catch: () => new ParseResult.Type(ast, value, "the column does not hold valid JSON")
      })
      : ParseResult.succeed(value),
  encode: (value) => ParseResult.succeed(JSON.stringify(value))
})

export const toJsonText = (value: unknown): string => JSON.stringify(value)

/** The result header of an INSERT / UPDATE / DELETE (`sql\`...\`.raw`). */
const ResultHeader = Schema.Struct({ affectedRows: Schema.Number })

export const affectedRows = (operation: string) => (self: Effect.Effect<unknown, SqlError>) =>
  self.pipe(
    Effect.mapError(toPersistenceError(operation)),
    Effect.flatMap((raw) =>
      Schema.decodeUnknown(ResultHeader)(raw).pipe(
        Effect.map((header) => header.affectedRows),
        Effect.mapError((error) => new PersistenceError({ operation, message: `unexpected result header at ${failedPaths(error)}` }))
      )
    )
  )

const decodeRows = <A, I>(schema: Schema.Schema<A, I>, operation: string) => {
  const decode = Schema.decodeUnknown(Schema.Array(schema))
  return (rows: ReadonlyArray<unknown>) =>
    decode(rows).pipe(
      Effect.mapError((error) => new PersistenceError({ operation, message: `row does not decode at ${failedPaths(error)}` }))
    )
}

const AiJobRow = Schema.Struct({ ...AiJob.fields, input: JsonColumn })
export const decodeAiJobs = (operation: string) => (rows: ReadonlyArray<unknown>) =>
  decodeRows(AiJobRow, operation)(rows).pipe(
    Effect.map((decoded) => decoded.map((fields) => new AiJob(fields, { disableValidation: true })))
  )

const OutboxEventRow = Schema.Struct({ ...OutboxEvent.fields, payload: JsonColumn })
export const decodeOutboxEvents = (operation: string) => (rows: ReadonlyArray<unknown>) =>
  decodeRows(OutboxEventRow, operation)(rows).pipe(
    Effect.map((decoded) => decoded.map((fields) => new OutboxEvent(fields, { disableValidation: true })))
  )

const JobSnapshotRow = Schema.Struct({ ...JobSnapshot.fields, content: JsonColumn })
export const decodeJobSnapshots = (operation: string) => (rows: ReadonlyArray<unknown>) =>
  decodeRows(JobSnapshotRow, operation)(rows).pipe(
    Effect.map((decoded) => decoded.map((fields) => new JobSnapshot(fields, { disableValidation: true })))
  )

export { decodeRows }
