import { HttpApiSchema } from "@effect/platform"
import { Option, ParseResult, Schema } from "effect"
import { CredentialMode } from "../domain/CredentialMode.js"
import { LifecycleStatus } from "../domain/LifecycleStatus.js"
import { OutboxStatus } from "../domain/OutboxEvent.js"
import { QueueName } from "../domain/QueueName.js"
import { maxChars, minChars } from "../domain/TextLength.js"
import { withValueFreeErrors } from "../domain/ValueFreeMessages.js"
import { FeynmanEvaluationInput } from "../jobs/feynman_evaluation/definition.js"
import { FlashcardGenerationInput } from "../jobs/flashcard_generation/definition.js"
import { LearningAnalysisInput } from "../jobs/learning_analysis/definition.js"
import { WorkerHeartbeat } from "../services/WorkerDirectory.js"

/**
 * The Schemas of every HTTP boundary: path params, queries, headers, bodies and answers.
 * The API answers in JSON; times are ISO-8601 strings in UTC. Every request schema is wrapped
 * in `withValueFreeErrors`: its decode errors name the field and the rule, never the value.
 */

// ---------------------------------------------------------------------------------------------
// The spec's JobStatusResponse, frozen.

export const ArtifactReference = Schema.Struct({
  artifactType: Schema.String,
  artifactId: Schema.String
}).annotations({ identifier: "ArtifactReference" })

export const JobResult = Schema.Struct({
  artifactCount: Schema.Number,
  artifacts: Schema.Array(ArtifactReference)
}).annotations({ identifier: "JobResult" })

const jobStatusFields = {
  jobId: Schema.String,
  jobType: Schema.String,
  lifecycleStatus: LifecycleStatus,
  queueName: Schema.String,
  priority: Schema.Number,
  /** 0–100 */
  progress: Schema.Number,
  createdAt: Schema.String,
  startedAt: Schema.optional(Schema.String),
  finishedAt: Schema.optional(Schema.String),
  errorCode: Schema.optional(Schema.String),
  /** For the user: fixed text per error code, never a stack, a path or an address. */
  publicErrorMessage: Schema.optional(Schema.String),
  /** Present once the job succeeded: what its projection wrote. */
  result: Schema.optional(JobResult)
}

/** `JobStatusResponse`, field for field (docs/architecture.md §15.2). */
export class JobStatusResponse extends Schema.Class<JobStatusResponse>("JobStatusResponse")(jobStatusFields, {
  description: "The job's status. Frozen: fields are never renamed or removed."
}) {}

/**
 * The same fields as `JobStatusResponse`, answered with 202 when a creation made a new job
 * (an `Idempotency-Key` that names an existing job answers 200 with `JobStatusResponse`).
 */
export class AcceptedJobStatusResponse extends Schema.Class<AcceptedJobStatusResponse>("AcceptedJobStatusResponse")(
  jobStatusFields,
  { description: "A JobStatusResponse for a job this request created." }
) {}

export const maxBatchItems = 100

/** A batch create's answer when its `Idempotency-Key` already made the jobs: 200, each as it stands now. */
export class JobBatchResponse extends Schema.Class<JobBatchResponse>("JobBatchResponse")(
  { jobs: Schema.Array(JobStatusResponse) },
  { description: "The jobs an Idempotency-Key already made for this batch, in the request's order, as they stand now." }
) {}

/** A batch create's answer when it made new jobs: 202, each job as a single create answers it. */
export class AcceptedJobBatchResponse extends Schema.Class<AcceptedJobBatchResponse>("AcceptedJobBatchResponse")(
  { jobs: Schema.Array(AcceptedJobStatusResponse) },
  { description: "The new jobs, one per item, in the request's order." }
) {}

const adminJobFields = {
  ...jobStatusFields,
  userId: Schema.String,
  targetType: Schema.String,
  targetId: Schema.String,
  credentialMode: CredentialMode,
  attemptCount: Schema.Number,
  maxAttempts: Schema.Number,
  cancelRequestedAt: Schema.optional(Schema.String),
  updatedAt: Schema.String,
  /** SUPER_ADMIN only. */
  internalErrorMessage: Schema.optional(Schema.String)
}

/** `JobStatusResponse` plus what only an operator may see. */
export class AdminJobStatusResponse
  extends Schema.Class<AdminJobStatusResponse>("AdminJobStatusResponse")(adminJobFields, {
    description: "JobStatusResponse plus operator fields, including internalErrorMessage (SUPER_ADMIN only)."
  })
{}

/** The job an operator's retry created (201). */
export class RetriedJobResponse extends Schema.Class<RetriedJobResponse>("RetriedJobResponse")(adminJobFields, {
  description: "The new job a retry created, with the same input as the original."
}) {}

// ---------------------------------------------------------------------------------------------
// Lists

/**
 * A time a list can be filtered or paged by: what a DATETIME column holds (years 1000 to 9999);
 * outside it the database would refuse the query.
 */
const StoredTime = Schema.Date.pipe(
  Schema.betweenDate(new Date("1000-01-01T00:00:00.000Z"), new Date("9999-12-31T23:59:59.999Z"), {
    message: () => "must be a time between the years 1000 and 9999"
  })
)

/**
 * The opaque keyset cursor: base64url of `{ createdAt, id }` of the last item seen. Clients
 * pass back `nextCursor` as it came; its content is not part of the contract.
 */
export const JobCursor = Schema.compose(
  Schema.StringFromBase64Url,
  Schema.parseJson(Schema.Struct({ createdAt: StoredTime, id: Schema.String.pipe(minChars(1)) }))
).annotations({
  identifier: "JobCursor",
  description: "Opaque: the nextCursor of the previous page.",
  message: () => ({ message: "is not a cursor this API issued", override: true })
})
export type JobCursor = typeof JobCursor.Type

export const defaultPageSize = 20
export const maxPageSize = 100

/** A query parameter that is a whole number, described as one (`type: integer`) though it arrives as text. */
const wholeNumberParam = (options: {
  readonly minimum: number
  readonly maximum?: number | undefined
  readonly description: string
  readonly message: string
}) =>
  Schema.NumberFromString.pipe(
    Schema.filter((n) =>
      Number.isInteger(n) && n >= options.minimum && (options.maximum === undefined || n <= options.maximum)
    ),
    Schema.annotations({
      description: options.description,
      message: () => ({ message: options.message, override: true }),
      jsonSchema: {
        type: "integer",
        minimum: options.minimum,
        ...(options.maximum === undefined ? {} : { maximum: options.maximum }),
        description: options.description
      }
    })
  )

const Limit = wholeNumberParam({
  minimum: 1,
  maximum: maxPageSize,
  description: `Page size, 1 to ${maxPageSize} (default ${defaultPageSize}).`,
  message: `must be a whole number from 1 to ${maxPageSize}`
})

export const pageParams = {
  cursor: Schema.optional(JobCursor),
  limit: Schema.optionalWith(Limit, { default: () => defaultPageSize })
}

/** One page of `item`s and the cursor of the next (null on the last page). */
export const pageOf = <A, I>(item: Schema.Schema<A, I>, identifier: string) =>
  Schema.Struct({
    items: Schema.Array(item),
    nextCursor: Schema.NullOr(Schema.String)
  }).annotations({ identifier })

export const UserJobListParams = withValueFreeErrors(Schema.Struct({
  status: Schema.optional(LifecycleStatus),
  ...pageParams
}))

const isoTimeMessage = () => ({ message: "must be an ISO-8601 time between the years 1000 and 9999", override: true })

/** RFC 3339 `date-time` as JSON Schema validators read it (`t`, `T` or a space; `Z`, `±hh`, `±hhmm` or `±hh:mm`), or a `date` alone. */
const dateTimeText =
  /^(?<year>\d{4})-(?<month>\d{2})-(?<day>\d{2})(?:[Tt ](?<hour>\d{2}):(?<minute>\d{2}):(?<second>\d{2})(?:\.(?<fraction>\d+))?(?:[Zz]|(?<sign>[+-])(?<zoneHours>\d{2})(?::?(?<zoneMinutes>\d{2}))?))?$/

const daysIn = (year: number, month: number) => new Date(Date.UTC(year, month, 0)).getUTCDate()

/** The instant a `date-time` (or a `date`, at its midnight UTC) names; none when a field is out of range or the year before 1000. */
const parseDateTime = (text: string): Option.Option<Date> => {
  const fields = dateTimeText.exec(text)?.groups
  if (fields === undefined) return Option.none()
  const number = (name: string) => Number(fields[name] ?? 0)
  const [year, month, day, hour, minute, second] = ["year", "month", "day", "hour", "minute", "second"].map(number)
  const [zoneHours, zoneMinutes] = [number("zoneHours"), number("zoneMinutes")]
  if (
    year === undefined || month === undefined || day === undefined || hour === undefined || minute === undefined ||
    second === undefined || year < 1000 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month) ||
    hour > 23 || minute > 59 || second > 60 || zoneHours > 23 || zoneMinutes > 59
  ) return Option.none()
  const millis = Number((fields["fraction"] ?? "").padEnd(3, "0").slice(0, 3))
  const offsetMinutes = (fields["sign"] === "-" ? -1 : 1) * (zoneHours * 60 + zoneMinutes)
  return Option.some(new Date(Date.UTC(year, month - 1, day, hour, minute, second, millis) - offsetMinutes * 60_000))
}

const firstStorable = new Date("1000-01-01T00:00:00.000Z")
const lastStorable = new Date("9999-12-31T23:59:59.999Z")

/**
 * A time filter: an RFC 3339 date-time (or date) in the years 1000 to 9999, as the description
 * says. An offset that moves it past the storable range is clamped to the range's edge, which
 * selects the same rows (no row is stored outside it).
 */
const FilterTime = (description: string) =>
  Schema.transformOrFail(Schema.String, Schema.DateFromSelf, {
    strict: true,
    decode: (text, _, ast) =>
      Option.match(parseDateTime(text), {
        onNone: () => ParseResult.fail(new ParseResult.Type(ast, text)),
        onSome: (date) =>
          ParseResult.succeed(
            new Date(Math.min(Math.max(date.getTime(), firstStorable.getTime()), lastStorable.getTime()))
          )
      }),
    encode: (date) => ParseResult.succeed(date.toISOString())
  }).annotations({
    description,
    message: isoTimeMessage,
    jsonSchema: {
      type: "string",
      anyOf: [{ format: "date-time" }, { format: "date" }],
      pattern: "^[1-9]",
      description: `${description} RFC 3339 date-time (a date alone is its midnight UTC), years 1000 to 9999.`
    }
  })

export const AdminJobListParams = withValueFreeErrors(Schema.Struct({
  jobType: Schema.optional(Schema.String.pipe(minChars(1), maxChars(64))),
  status: Schema.optional(LifecycleStatus),
  queueName: Schema.optional(QueueName),
  createdFrom: Schema.optional(FilterTime("Created at or after this time.")),
  createdTo: Schema.optional(FilterTime("Created before this time.")),
  ...pageParams
}))

export const JobStatusPage = pageOf(JobStatusResponse, "JobStatusPage")

export const AdminJobStatusPage = pageOf(AdminJobStatusResponse, "AdminJobStatusPage")

// ---------------------------------------------------------------------------------------------
// Path params and headers

export const JobIdParam = withValueFreeErrors(
  Schema.Struct({ jobId: Schema.String.pipe(minChars(1), maxChars(64)) })
)
export const EventIdParam = withValueFreeErrors(
  Schema.Struct({ eventId: Schema.String.pipe(minChars(1), maxChars(64)) })
)
export const CredentialIdParam = withValueFreeErrors(Schema.Struct({
  credentialId: Schema.String.pipe(minChars(1), maxChars(64))
}))

/** Node lower-cases header names; the header is `Idempotency-Key`. */
export const CreationHeaders = withValueFreeErrors(Schema.Struct({
  "idempotency-key": Schema.optional(
    Schema.String.pipe(
      minChars(1),
      maxChars(191),
      Schema.annotations({
        description: "The same key from the same user for the same job type returns the same job (200 instead of 202)."
      })
    )
  )
}))

// ---------------------------------------------------------------------------------------------
// Creation bodies. Unknown fields are refused (a misspelt optional field must not vanish).

const strict = { parseOptions: { onExcessProperty: "error", errors: "all" } } as const

/** The job type's own input Schema (one source of truth), strict about unknown fields. */
export const FlashcardGenerationRequest = withValueFreeErrors(FlashcardGenerationInput.annotations({
  identifier: "FlashcardGenerationRequest",
  ...strict
}))

export const FeynmanEvaluationRequest = withValueFreeErrors(FeynmanEvaluationInput.annotations({
  identifier: "FeynmanEvaluationRequest",
  ...strict
}))

export const LearningAnalysisRequest = withValueFreeErrors(LearningAnalysisInput.annotations({
  identifier: "LearningAnalysisRequest",
  description:
    "Evaluation results to analyse, as the artifacts of the caller's feynman_evaluation jobs show them (records of type learning_evaluation).",
  ...strict
}))

/**
 * A batch body: `items`, 1 to `maxBatchItems` inputs of one job type, each checked as the single
 * create checks it; a problem is named by the item's index (`items[3]: sourceText: is missing`).
 */
const batchOf = <A, I>(item: Schema.Schema<A, I>, identifier: string, description: string) =>
  withValueFreeErrors(
    Schema.Struct({
      items: Schema.Array(item).pipe(Schema.minItems(1), Schema.maxItems(maxBatchItems))
    }).annotations({ identifier, description, ...strict })
  )

export const FlashcardGenerationBatchRequest = batchOf(
  FlashcardGenerationRequest,
  "FlashcardGenerationBatchRequest",
  "Flashcard generations to create together: all are created or none."
)
export const FeynmanEvaluationBatchRequest = batchOf(
  FeynmanEvaluationRequest,
  "FeynmanEvaluationBatchRequest",
  "Feynman evaluations to create together: all are created or none."
)
export const LearningAnalysisBatchRequest = batchOf(
  LearningAnalysisRequest,
  "LearningAnalysisBatchRequest",
  "Learning analyses to create together: all are created or none."
)

// ---------------------------------------------------------------------------------------------
// Artifacts

export const StoredArtifactResponse = Schema.Struct({
  artifactType: Schema.String,
  artifactId: Schema.String,
  ordinal: Schema.Number
}).annotations({ identifier: "StoredArtifact" })

export const JobArtifactsResponse = Schema.Struct({
  jobId: Schema.String,
  jobType: Schema.String,
  lifecycleStatus: LifecycleStatus,
  artifacts: Schema.Array(StoredArtifactResponse),
  /** The business rows the projection wrote (flashcards, an evaluation); empty until the job succeeded. */
  records: Schema.Array(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
}).annotations({ identifier: "JobArtifactsResponse" })

// ---------------------------------------------------------------------------------------------
// Credentials

const ApiKey = Schema.Redacted(
  Schema.String.pipe(
    minChars(1),
    maxChars(512),
    Schema.pattern(/^\S+$/, { message: () => "must not contain whitespace" })
  )
).annotations({ description: "The DeepSeek API key. Stored encrypted; never returned." })

export const StoreCredentialRequest = withValueFreeErrors(
  Schema.Struct({ apiKey: ApiKey }).annotations({
    identifier: "StoreCredentialRequest",
    ...strict
  })
)

export const StoredCredentialResponse = Schema.Struct({
  credentialId: Schema.String,
  provider: Schema.String,
  keyVersion: Schema.Number,
  createdAt: Schema.String
}).annotations({ identifier: "StoredCredential" })

export const ResolveCredentialRequest = withValueFreeErrors(
  Schema.Struct({
    jobId: Schema.String.pipe(
      minChars(1),
      maxChars(64),
      Schema.annotations({ description: "The running (or queued) job the key is for; it must name this credential." })
    )
  }).annotations({ identifier: "ResolveCredentialRequest", ...strict })
)

export const ResolvedCredentialResponse = Schema.Struct({
  credentialId: Schema.String,
  provider: Schema.String,
  apiKey: Schema.Redacted(Schema.String)
}).annotations({ identifier: "ResolvedCredential" })

// ---------------------------------------------------------------------------------------------
// Operators

export const OutboxCountsResponse = Schema.Struct({
  pending: Schema.Number,
  processing: Schema.Number,
  published: Schema.Number,
  failed: Schema.Number,
  dead: Schema.Number
}).annotations({ identifier: "OutboxCounts" })

export const OutboxEventResponse = Schema.Struct({
  eventId: Schema.String,
  eventType: Schema.String,
  aggregateType: Schema.String,
  aggregateId: Schema.String,
  status: OutboxStatus,
  attemptCount: Schema.Number,
  availableAt: Schema.String,
  lastError: Schema.optional(Schema.String)
}).annotations({ identifier: "OutboxEvent" })

export const WorkersResponse = Schema.Struct({
  workers: Schema.Array(WorkerHeartbeat.annotations({ identifier: "WorkerHeartbeat" }))
}).annotations({ identifier: "Workers" })

// ---------------------------------------------------------------------------------------------
// Health

export const HealthResponse = Schema.Struct({ status: Schema.Literal("ok") }).annotations({ identifier: "Health" })

export const CheckResultSchema = Schema.Struct({
  name: Schema.String,
  backend: Schema.String,
  status: Schema.Literal("up", "down"),
  latencyMs: Schema.Number
}).annotations({ identifier: "ReadinessCheck" })

export const ReadyResponse = Schema.Struct({
  status: Schema.Literal("ready"),
  checks: Schema.Array(CheckResultSchema)
}).annotations({ identifier: "Ready" })

/** `/readyz` when a check is down: PLATFORM_UNAVAILABLE, naming what does not answer. */
export class NotReady extends Schema.Class<NotReady>("NotReady")(
  { code: Schema.tag("PLATFORM_UNAVAILABLE"), message: Schema.String, checks: Schema.Array(CheckResultSchema) },
  HttpApiSchema.annotations({ status: 503, description: "A backing store does not answer; the message names it." })
) {}

// Following a job: the long poll's parameters and the event stream.

export const maxWaitMs = 30_000

export const JobWaitParams = withValueFreeErrors(Schema.Struct({
  waitFor: Schema.optional(
    Schema.Literal("terminal").annotations({
      description: "Hold the request until the job is succeeded, failed or cancelled (or timeoutMs passes)."
    })
  ),
  timeoutMs: Schema.optional(wholeNumberParam({
    minimum: 0,
    description:
      `How long to wait with waitFor=terminal, in ms; capped at ${maxWaitMs} (the default). The answer is the status at that moment.`,
    message: "must be a whole number of milliseconds, 0 or more"
  }))
}))

export const JobEventsHeaders = withValueFreeErrors(Schema.Struct({
  "last-event-id": Schema.optional(Schema.String.annotations({
    description: "The id of the last event received: the current status is sent again only if it changed since."
  }))
}))

/** `GET /api/ai/jobs/:jobId/events`: Server-Sent Events, each `data:` a JobStatusResponse. */
export const JobEventStream = Schema.String.pipe(
  HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/event-stream" })
).annotations({
  identifier: "JobEventStream",
  description:
    "Server-Sent Events. Each event is `id: <state>`, `event: status`, `data: <JobStatusResponse JSON>`: the current " +
    "status first, then one per change (lifecycle or progress). A comment line `: heartbeat` every 15 s. The stream " +
    "closes after the terminal status (succeeded, failed, cancelled). Reconnect with `Last-Event-ID` to get the " +
    "current status again if it changed; a reconnect after the terminal event answers 204 (EventSource stops)."
})
