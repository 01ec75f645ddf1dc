import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"

/**
 * The public errors of the HTTP API (docs/architecture.md §15.3): the spec's codes plus the routes' own.
 * Every error is the JSON `{ "code": "...", "message": "..." }` with its own HTTP status; one
 * class per code, so that OpenAPI lists exactly which codes each route answers. `message` is
 * written for the caller: fixed text or text we composed from validated fields, never a stack,
 * a path, an address or a database message.
 */

export class InvalidRequest extends Schema.Class<InvalidRequest>("InvalidRequest")(
  { code: Schema.tag("INVALID_REQUEST"), message: Schema.String },
  HttpApiSchema.annotations({
    status: 400,
    description: "The request does not match its schema; the message names the field."
  })
) {}

export class Unauthorized extends Schema.Class<Unauthorized>("Unauthorized")(
  { code: Schema.tag("UNAUTHORIZED"), message: Schema.String },
  HttpApiSchema.annotations({ status: 401, description: "Missing, malformed, expired or wrongly signed credentials." })
) {}

export class Forbidden extends Schema.Class<Forbidden>("Forbidden")(
  { code: Schema.tag("FORBIDDEN"), message: Schema.String },
  HttpApiSchema.annotations({ status: 403, description: "The caller's role may not use this route." })
) {}

export class JobNotFoundError extends Schema.Class<JobNotFoundError>("JobNotFoundError")(
  { code: Schema.tag("JOB_NOT_FOUND"), message: Schema.String },
  HttpApiSchema.annotations({ status: 404, description: "The job does not exist or is not the caller's." })
) {}

export class CredentialNotFoundError extends Schema.Class<CredentialNotFoundError>("CredentialNotFoundError")(
  { code: Schema.tag("CREDENTIAL_NOT_FOUND"), message: Schema.String },
  HttpApiSchema.annotations({ status: 404, description: "No such active credential." })
) {}

export class OutboxEventNotFoundError extends Schema.Class<OutboxEventNotFoundError>("OutboxEventNotFoundError")(
  { code: Schema.tag("OUTBOX_EVENT_NOT_FOUND"), message: Schema.String },
  HttpApiSchema.annotations({ status: 404, description: "No outbox event has this id." })
) {}

export class JobNotCancellableError extends Schema.Class<JobNotCancellableError>("JobNotCancellableError")(
  { code: Schema.tag("JOB_NOT_CANCELLABLE"), message: Schema.String },
  HttpApiSchema.annotations({ status: 409, description: "The job has ended and cannot be cancelled." })
) {}

export class JobAlreadyCancelledError extends Schema.Class<JobAlreadyCancelledError>("JobAlreadyCancelledError")(
  { code: Schema.tag("JOB_ALREADY_CANCELLED"), message: Schema.String },
  HttpApiSchema.annotations({ status: 409, description: "The job was already cancelled." })
) {}

export class JobNotRetryableError extends Schema.Class<JobNotRetryableError>("JobNotRetryableError")(
  { code: Schema.tag("JOB_NOT_RETRYABLE"), message: Schema.String },
  HttpApiSchema.annotations({ status: 409, description: "Only failed or cancelled jobs can be retried." })
) {}

export class OutboxEventNotDeadError extends Schema.Class<OutboxEventNotDeadError>("OutboxEventNotDeadError")(
  { code: Schema.tag("OUTBOX_EVENT_NOT_DEAD"), message: Schema.String },
  HttpApiSchema.annotations({ status: 409, description: "Only a dead outbox event can be replayed." })
) {}

export class IdempotencyKeyReusedError extends Schema.Class<IdempotencyKeyReusedError>("IdempotencyKeyReusedError")(
  { code: Schema.tag("IDEMPOTENCY_KEY_REUSED"), message: Schema.String },
  HttpApiSchema.annotations({
    status: 409,
    description: "The Idempotency-Key already names a job of this caller created from a different request body."
  })
) {}

export class TooManyJobsError extends Schema.Class<TooManyJobsError>("TooManyJobsError")(
  { code: Schema.tag("TOO_MANY_JOBS"), message: Schema.String },
  HttpApiSchema.annotations({ status: 429, description: "The caller has the most queued and running jobs allowed." })
) {}

export class QuotaExceededError extends Schema.Class<QuotaExceededError>("QuotaExceededError")(
  { code: Schema.tag("QUOTA_EXCEEDED"), message: Schema.String },
  HttpApiSchema.annotations({ status: 429, description: "The caller's daily job quota is used up." })
) {}

export class RouteNotFound extends Schema.Class<RouteNotFound>("RouteNotFound")(
  { code: Schema.tag("ROUTE_NOT_FOUND"), message: Schema.String },
  HttpApiSchema.annotations({ status: 404, description: "No route has this path." })
) {}

export class MethodNotAllowed extends Schema.Class<MethodNotAllowed>("MethodNotAllowed")(
  { code: Schema.tag("METHOD_NOT_ALLOWED"), message: Schema.String },
  HttpApiSchema.annotations({
    status: 405,
    description: "The path exists but does not take this method; `Allow` lists the ones it takes."
  })
) {}

export class TooManyStreamsError extends Schema.Class<TooManyStreamsError>("TooManyStreamsError")(
  { code: Schema.tag("TOO_MANY_STREAMS"), message: Schema.String },
  HttpApiSchema.annotations({
    status: 429,
    description:
      "The caller (SSE_MAX_PER_USER) or the server (SSE_MAX_PER_PROCESS) holds the most live streams and long polls allowed; see Retry-After."
  })
) {}

export class PayloadTooLarge extends Schema.Class<PayloadTooLarge>("PayloadTooLarge")(
  { code: Schema.tag("PAYLOAD_TOO_LARGE"), message: Schema.String },
  HttpApiSchema.annotations({
    status: 413,
    description: "The request body is larger than HTTP_MAX_BODY_BYTES; it is not read further."
  })
) {}

export class UnsupportedMediaType extends Schema.Class<UnsupportedMediaType>("UnsupportedMediaType")(
  { code: Schema.tag("UNSUPPORTED_MEDIA_TYPE"), message: Schema.String },
  HttpApiSchema.annotations({ status: 415, description: "A request body must be application/json (UTF-8)." })
) {}

export class InternalServerError extends Schema.Class<InternalServerError>("InternalServerError")(
  { code: Schema.tag("INTERNAL_ERROR"), message: Schema.String },
  HttpApiSchema.annotations({ status: 500, description: "An unexpected error; details are in the server log only." })
) {}

export class PlatformUnavailable extends Schema.Class<PlatformUnavailable>("PlatformUnavailable")(
  { code: Schema.tag("PLATFORM_UNAVAILABLE"), message: Schema.String },
  HttpApiSchema.annotations({
    status: 503,
    description:
      "The database or Redis does not answer, or the AI platform is switched off (AI_PLATFORM_ENABLED=false)."
  })
) {}

/** Fixed public messages: the same words whatever the internal cause. */
export const publicMessages = {
  unauthorized: "A valid bearer token is required.",
  forbidden: "This route needs the SUPER_ADMIN role.",
  jobNotFound: "The job does not exist.",
  platformUnavailable: "The AI platform is unavailable right now. Please try again later.",
  platformDisabled: "The AI platform is switched off.",
  routeNotFound: "No route has this path. /openapi.json lists the routes.",
  methodNotAllowed: "This path does not take this method. The Allow header lists the ones it takes.",
  internal: "An internal error occurred."
} as const

export const unauthorized = () => new Unauthorized({ message: publicMessages.unauthorized })
export const forbidden = () => new Forbidden({ message: publicMessages.forbidden })
export const jobNotFound = () => new JobNotFoundError({ message: publicMessages.jobNotFound })
export const platformUnavailable = () => new PlatformUnavailable({ message: publicMessages.platformUnavailable })
export const internalServerError = () => new InternalServerError({ message: publicMessages.internal })
