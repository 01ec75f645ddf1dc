import { Schema } from "effect"
import { CredentialMode } from "./CredentialMode.js"
import { QueueName } from "./QueueName.js"

export const timeoutBoundsMs = { min: 1_000, max: 600_000 } as const
export const priorityBounds = { min: 0, max: 100 } as const
/** More retries than this is a typo, not a policy: ten exponential backoffs already span hours. */
export const maxRetriesLimit = 10

/** A rule's own words for any decode of it: never the value that broke it. */
const rule = (text: string) => ({ message: () => ({ message: text, override: true }) })

export const priorityRule = `must be a whole number from ${priorityBounds.min} to ${priorityBounds.max}`

/** 0 = highest, 100 = lowest (the spec's scale; mapped to BullMQ's at the queue). */
export const JobPriority = Schema.Int.pipe(Schema.between(priorityBounds.min, priorityBounds.max, rule(priorityRule)))

/** How long one provider call of a job may take. */
export const JobTimeoutMs = Schema.Number.pipe(
  Schema.between(
    timeoutBoundsMs.min,
    timeoutBoundsMs.max,
    rule(`must be from ${timeoutBoundsMs.min} to ${timeoutBoundsMs.max} ms`)
  )
)

/**
 * The spec's JobDefinition, field for field (docs/architecture.md §16.1): data only. The code
 * that runs a job type (schemas, prompt, projector) lives in its `JobType` bundle.
 */
export class JobDefinition extends Schema.Class<JobDefinition>("JobDefinition")({
  jobType: Schema.String,
  metadata: Schema.Struct({
    label: Schema.String,
    description: Schema.String,
    domain: Schema.Literal("analysis", "generation", "import", "maintenance"),
    version: Schema.String
  }),
  queue: Schema.Struct({
    queueName: QueueName,
    defaultPriority: JobPriority
  }),
  execution: Schema.Struct({
    timeoutMs: JobTimeoutMs,
    /** Retries after the first engine attempt. */
    maxRetries: Schema.Number,
    retryBackoff: Schema.Struct({ type: Schema.Literal("exponential"), delay: Schema.Number }),
    cancellable: Schema.Boolean,
    abortStrategy: Schema.Literal("fail", "retry")
  }),
  input: Schema.Struct({ schemaVersion: Schema.String }),
  output: Schema.Struct({ schemaVersion: Schema.String, validator: Schema.optional(Schema.String) }),
  credential: Schema.Struct({
    allowedModes: Schema.Array(CredentialMode),
    defaultMode: CredentialMode
  }),
  projector: Schema.optional(Schema.String),
  security: Schema.Struct({
    contentSafetyCheck: Schema.Boolean,
    outputRedaction: Schema.Boolean
  })
}) {}

/**
 * The loose shape a definition is first read as, so that each rule it breaks can be reported
 * with its own typed error (a bad queue name is `InvalidQueue`, not a parse failure).
 */
export const JobDefinitionDraft = Schema.Struct({
  jobType: Schema.String,
  metadata: JobDefinition.fields.metadata,
  queue: Schema.Struct({ queueName: Schema.String, defaultPriority: Schema.Number }),
  execution: Schema.Struct({ ...JobDefinition.fields.execution.fields, timeoutMs: Schema.Number }),
  input: JobDefinition.fields.input,
  output: JobDefinition.fields.output,
  credential: Schema.Struct({
    allowedModes: Schema.Array(Schema.String),
    defaultMode: Schema.String
  }),
  projector: Schema.optional(Schema.String),
  security: JobDefinition.fields.security
})
export type JobDefinitionDraft = typeof JobDefinitionDraft.Type

/** The spec's pattern; job types use underscores. */
export const jobTypePattern = /^[a-z][a-z0-9_]{1,63}$/
