import { Effect, ParseResult, Schema } from "effect"
import { AiJob } from "../../domain/AiJob.js"
import { JobSnapshot } from "../../domain/JobSnapshot.js"
import { OutboxEvent } from "../../domain/OutboxEvent.js"

// The rows the MySQL repositories read and write, as `SqlSchema` request and result schemas:
// built once here, each a domain schema with its JSON column swapped in. Inserts write a row's
// keys as columns (`sql.update(row)` in MySQL's `INSERT ... SET`, names through
// transformQueryNames) because their clock columns are SQL expressions, which `sql.insert` binds
// as values.

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

/** The result header of an INSERT / UPDATE / DELETE (`sql\`...\`.raw`): how many rows it changed. */
export const AffectedRows = Schema.Struct({ affectedRows: Schema.Number }).pipe(
  Schema.transform(Schema.Number, {
    strict: true,
    decode: (header) => header.affectedRows,
    encode: (affectedRows) => ({ affectedRows })
  })
)

const decodeAffectedRows = Schema.decodeUnknown(AffectedRows)

/** Runs an INSERT / UPDATE / DELETE (its `.raw` form) and answers how many rows it changed. */
export const changedRows = <E, R>(statement: Effect.Effect<unknown, E, R>) =>
  Effect.flatMap(statement, decodeAffectedRows)

/** A `COUNT(*) AS total`: mysql2 hands a BIGINT over as a number or, past 2^53, a string. */
export const Total = Schema.Struct({ total: Schema.Union(Schema.Number, Schema.NumberFromString) })

/** `ai_job`'s columns as decoded (its JSON column parsed), before they become an `AiJob`. */
export const AiJobColumns = Schema.Struct({ ...AiJob.fields, input: JsonColumn })
/** An `ai_job` row, as the domain's `AiJob`. */
export const AiJobRow = Schema.compose(AiJobColumns, AiJob)
/** What `createJob` writes: every column but the two the database clock fills. */
export const NewAiJobRow = AiJobColumns.pipe(Schema.omit("createdAt", "updatedAt"))

/** `outbox_event.delivered_to`: a JSON array of delivery target keys; NULL (older rows) is none. */
const DeliveredToColumn = Schema.transformOrFail(Schema.Unknown, Schema.Array(Schema.String), {
  strict: true,
  decode: (value, _, ast) =>
    value === null || value === undefined
      ? ParseResult.succeed([])
      : ParseResult.decodeUnknown(JsonColumn)(value).pipe(
        ParseResult.flatMap((parsed) => ParseResult.decodeUnknown(Schema.Array(Schema.String))(parsed)),
        ParseResult.mapError(() => new ParseResult.Type(ast, value, "delivered_to is not a JSON array of strings"))
      ),
  encode: (keys) => ParseResult.succeed(JSON.stringify(keys))
})

const OutboxEventColumns = Schema.Struct({ ...OutboxEvent.fields, payload: JsonColumn, deliveredTo: DeliveredToColumn })
/** An `outbox_event` row, as the domain's `OutboxEvent`. */
export const OutboxEventRow = Schema.compose(OutboxEventColumns, OutboxEvent)
/** What `createInTransaction` writes: every column but the three the database clock fills. */
export const NewOutboxEventRow = OutboxEventColumns.pipe(
  Schema.omit("availableAt", "createdAt", "updatedAt", "traceParent")
)

const JobSnapshotColumns = Schema.Struct({ ...JobSnapshot.fields, content: JsonColumn })
/** An `ai_job_snapshot` row, as the domain's `JobSnapshot`. */
export const JobSnapshotRow = Schema.compose(JobSnapshotColumns, JobSnapshot)
/** What `create` writes: every column but `created_at`, the database clock's. */
export const NewJobSnapshotRow = JobSnapshotColumns.pipe(Schema.omit("createdAt"))

/** `ai_job_batch.job_ids`: the batch's job ids, in request order, as a JSON array. */
const JobIdsColumn = JsonColumn.pipe(Schema.compose(Schema.Array(Schema.String), { strict: false }))

/** An `ai_job_batch` row without its `created_at` (the database clock's). */
export const JobBatchRow = Schema.Struct({
  id: Schema.String,
  userId: Schema.String,
  jobType: Schema.String,
  idempotencyKey: Schema.String,
  requestHash: Schema.String,
  jobIds: JobIdsColumn
})
