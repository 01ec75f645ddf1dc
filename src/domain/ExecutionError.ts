import { Schema } from "effect"

/**
 * The error taxonomy of job execution (docs/architecture.md §9.1). One tagged class per
 * category, each carrying its code. `message` is internal detail (it reaches
 * `internal_error_message` and operators); what a user sees is `publicMessageOf(code)`, fixed
 * text with no stack, path or address.
 */

export class ProviderError extends Schema.TaggedError<ProviderError>()("ProviderError", {
  code: Schema.Literal(
    "PROVIDER_RATE_LIMITED",
    "PROVIDER_UNAVAILABLE",
    "PROVIDER_TIMEOUT",
    /** The provider refused the request itself (HTTP 400/404/422: an unknown model, a parameter it lacks). */
    "PROVIDER_REQUEST_REJECTED",
    /** The answer was larger than `AI_MAX_RESPONSE_BYTES`: the read was stopped there. */
    "PROVIDER_RESPONSE_TOO_LARGE"
  ),
  message: Schema.String,
  /** From `Retry-After`: the provider's own word on when to come back. */
  retryAfterMs: Schema.optional(Schema.Number),
  /** False when the request never reached the provider (the connection was refused): no usage row. */
  sent: Schema.optional(Schema.Boolean)
}) {}

export class ValidationError extends Schema.TaggedError<ValidationError>()("ValidationError", {
  code: Schema.Literal("VALIDATION_OUTPUT_SCHEMA", "VALIDATION_MALFORMED_JSON", "VALIDATION_PROVIDER_RESPONSE"),
  message: Schema.String,
  /** What was wrong, phrased for the model: the retry adds these to the prompt. */
  problems: Schema.Array(Schema.String)
}) {}

export class ContentSafetyError extends Schema.TaggedError<ContentSafetyError>()("ContentSafetyError", {
  /** `CONTENT_SAFETY_REFUSED`: the model declined to answer (OpenAI's `refusal`). */
  code: Schema.Literal("CONTENT_SAFETY_BLOCKED", "CONTENT_SAFETY_REFUSED"),
  message: Schema.String,
  stage: Schema.Literal("input", "output", "provider")
}) {}

export class JobTimeoutError extends Schema.TaggedError<JobTimeoutError>()("JobTimeoutError", {
  code: Schema.Literal("TIMEOUT"),
  message: Schema.String,
  timeoutMs: Schema.Number
}) {}

export class CredentialError extends Schema.TaggedError<CredentialError>()("CredentialError", {
  code: Schema.Literal("CREDENTIAL_INVALID", "CREDENTIAL_NOT_FOUND", "CREDENTIAL_DECRYPT_FAILED", "CREDENTIAL_MISSING"),
  message: Schema.String
}) {}

export class JobCancelledError extends Schema.TaggedError<JobCancelledError>()("JobCancelledError", {
  code: Schema.Literal("CANCELLED"),
  message: Schema.String
}) {}

export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", {
  code: Schema.Literal("INTERNAL_ERROR", "INTERNAL_WORKER_LOST", "INTERNAL_PERSISTENCE", "INTERNAL_QUEUE"),
  message: Schema.String
}) {}

/** The union is its Schema: the type and `isExecutionError` both derive from this one list. */
export const ExecutionError = Schema.Union(
  ProviderError,
  ValidationError,
  ContentSafetyError,
  JobTimeoutError,
  CredentialError,
  JobCancelledError,
  InternalError
)
export type ExecutionError = typeof ExecutionError.Type

export type ErrorCode = ExecutionError["code"]

export type ErrorCategory =
  | "PROVIDER"
  | "VALIDATION"
  | "CONTENT_SAFETY"
  | "TIMEOUT"
  | "CREDENTIAL"
  | "CANCELLED"
  | "INTERNAL"

export const categoryOf = (error: ExecutionError): ErrorCategory => {
  switch (error._tag) {
    case "ProviderError":
      return "PROVIDER"
    case "ValidationError":
      return "VALIDATION"
    case "ContentSafetyError":
      return "CONTENT_SAFETY"
    case "JobTimeoutError":
      return "TIMEOUT"
    case "CredentialError":
      return "CREDENTIAL"
    case "JobCancelledError":
      return "CANCELLED"
    case "InternalError":
      return "INTERNAL"
  }
}

const publicMessages: Readonly<Record<ErrorCode, string>> = {
  PROVIDER_RATE_LIMITED: "The AI provider is busy. Please try again later.",
  PROVIDER_UNAVAILABLE: "The AI provider is unavailable right now. Please try again later.",
  PROVIDER_TIMEOUT: "The AI provider did not answer in time.",
  PROVIDER_REQUEST_REJECTED: "The AI provider could not handle this request.",
  PROVIDER_RESPONSE_TOO_LARGE: "The AI provider sent an answer that was too large.",
  VALIDATION_OUTPUT_SCHEMA: "The AI answer did not have the expected form.",
  VALIDATION_MALFORMED_JSON: "The AI answer could not be read.",
  VALIDATION_PROVIDER_RESPONSE: "The AI provider sent an unexpected response.",
  CONTENT_SAFETY_BLOCKED: "The content was blocked by the safety check.",
  CONTENT_SAFETY_REFUSED: "The AI model declined to answer this request.",
  TIMEOUT: "The job took too long and was stopped.",
  CREDENTIAL_INVALID: "The API key was rejected by the AI provider.",
  CREDENTIAL_NOT_FOUND: "No API key is stored for this job.",
  CREDENTIAL_DECRYPT_FAILED: "The stored API key could not be used. Please store it again.",
  CREDENTIAL_MISSING: "The AI platform key is not configured.",
  CANCELLED: "The job was cancelled.",
  INTERNAL_ERROR: "An internal error occurred.",
  INTERNAL_WORKER_LOST: "The worker running this job stopped unexpectedly.",
  INTERNAL_PERSISTENCE: "An internal storage error occurred.",
  INTERNAL_QUEUE: "An internal queue error occurred."
}

export const publicMessageOf = (code: ErrorCode): string => publicMessages[code]

/** An instance of one of the union's classes (the retry schedule sees every error, not only these). */
export const isExecutionError: (value: unknown) => value is ExecutionError = Schema.is(ExecutionError)
