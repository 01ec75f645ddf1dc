import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { CredentialMode } from "../domain/CredentialMode.js"
import { LifecycleStatus } from "../domain/LifecycleStatus.js"
import { OutboxStatus } from "../domain/OutboxEvent.js"
import { QueueName } from "../domain/QueueName.js"
import { FeynmanEvaluationInput } from "../jobs/feynman_evaluation/definition.js"
import { FlashcardGenerationInput } from "../jobs/flashcard_generation/definition.js"
import { LearningAnalysisInput } from "../jobs/learning_analysis/definition.js"
import { WorkerHeartbeat } from "../services/WorkerDirectory.js"
import { withValueFreeErrors } from "../domain/ValueFreeMessages.js"

/**
 * The Schemas of every HTTP boundary: path params, queries, headers, bodies and answers.
 * The API answers in JSON; times are ISO-8601 strings in UTC. Every request schema is wrapped
 * in `withValueFreeErrors`: its decode errors name the field and the rule, never the value.
 */

// ---------------------------------------------------------------------------------------------
// The spec's JobStatusResponse, frozen: docs/architecture.md §15.2.

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
  /** SUPER_ADMIN only (docs/architecture.md §15.4). */
  internalErrorMessage: Schema.optional(Schema.String)
}

/** `JobStatusResponse` plus what only an operator may see (docs/architecture.md §15.4). */
export class AdminJobStatusResponse extends Schema.Class<AdminJobStatusResponse>("AdminJobStatusResponse")(adminJobFields, {
  description: "JobStatusResponse plus operator fields, including internalErrorMessage (SUPER_ADMIN only)."
}) {}

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
  Schema.parseJson(Schema.Struct({ createdAt: StoredTime, id: Schema.String.pipe(Schema.minLength(1)) }))
).annotations({
  identifier: "JobCursor",
  description: "Opaque: the nextCursor of the previous page.",
  message: () => ({ message: "is not a cursor this API issued", override: true })
})
export type JobCursor = typeof JobCursor.Type

export const defaultPageSize = 20
export const maxPageSize = 100

const Limit = Schema.NumberFromString.pipe(
  Schema.int(),
  Schema.between(1, maxPageSize),
  Schema.annotations({
    description: `Page size, 1 to ${maxPageSize} (default ${defaultPageSize}).`,
    message: () => ({ message: `must be a whole number from 1 to ${maxPageSize}`, override: true })
  })
)

/** The paging fields every list endpoint takes. */
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

export const AdminJobListParams = withValueFreeErrors(Schema.Struct({
  jobType: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64))),
  status: Schema.optional(LifecycleStatus),
  queueName: Schema.optional(QueueName),
  createdFrom: Schema.optional(StoredTime.annotations({ description: "ISO-8601 time, inclusive.", message: isoTimeMessage })),
  createdTo: Schema.optional(StoredTime.annotations({ description: "ISO-8601 time, exclusive.", message: isoTimeMessage })),
  ...pageParams
}))

export const JobStatusPage = pageOf(JobStatusResponse, "JobStatusPage")

export const AdminJobStatusPage = pageOf(AdminJobStatusResponse, "AdminJobStatusPage")

// ---------------------------------------------------------------------------------------------
// Path params and headers

export const JobIdParam = withValueFreeErrors(
  Schema.Struct({ jobId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64)) })
)
export const EventIdParam = withValueFreeErrors(
  Schema.Struct({ eventId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64)) })
)
export const CredentialIdParam = withValueFreeErrors(Schema.Struct({
  credentialId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64))
}))

/** Node lower-cases header names; the header is `Idempotency-Key`. */
export const CreationHeaders = withValueFreeErrors(Schema.Struct({
  "idempotency-key": Schema.optional(
    Schema.String.pipe(
      Schema.minLength(1),
      Schema.maxLength(191),
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
  description: "Evaluation results to analyse, as the artifacts of the caller's feynman_evaluation jobs show them (records of type learning_evaluation).",
  ...strict
}))

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
    Schema.minLength(1),
    Schema.maxLength(512),
    Schema.pattern(/^\S+$/, { message: () => "must not contain whitespace" })
  )
).annotations({ description: "The DeepSeek API key. Stored encrypted; never returned." })

export const StoreCredentialRequest = withValueFreeErrors(Schema.Struct({ apiKey: ApiKey }).annotations({
  identifier: "StoreCredentialRequest",
  ...strict
}))

export const StoredCredentialResponse = Schema.Struct({
  credentialId: Schema.String,
  provider: Schema.String,
  keyVersion: Schema.Number,
  createdAt: Schema.String
}).annotations({ identifier: "StoredCredential" })

export const ResolveCredentialRequest = withValueFreeErrors(Schema.Struct({
  jobId: Schema.String.pipe(
    Schema.minLength(1),
    Schema.maxLength(64),
    Schema.annotations({ description: "The running (or queued) job the key is for; it must name this credential." })
  )
}).annotations({ identifier: "ResolveCredentialRequest", ...strict }))

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

// Following a job (docs/architecture.md §15.5): the long poll's parameters and the event stream.

/** The longest a long poll waits. */
export const maxWaitMs = 30_000

export const JobWaitParams = withValueFreeErrors(Schema.Struct({
  waitFor: Schema.optional(Schema.Literal("terminal").annotations({
    description: "Hold the request until the job is succeeded, failed or cancelled (or timeoutMs passes)."
  })),
  timeoutMs: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative()).annotations({
    description: `How long to wait with waitFor=terminal, in ms; capped at ${maxWaitMs} (the default). The answer is the status at that moment.`
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
