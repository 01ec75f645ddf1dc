import { HttpApiBuilder, HttpApiError, HttpServerError } from "@effect/platform"
import { Cause, Clock, Effect, Option, Schema } from "effect"
import type { CredentialError } from "../domain/ExecutionError.js"
import type { IdempotencyKeyReused, InvalidJobInput } from "../domain/JobCreationErrors.js"
import type { JobAlreadyCancelled, JobNotCancellable } from "../domain/LifecycleErrors.js"
import type { PersistenceError } from "../domain/PersistenceError.js"
import type { QuotaExceeded, TooManyJobs } from "../domain/QuotaErrors.js"
import type { UnknownJobType } from "../domain/RegistryErrors.js"
import { AiJobApi } from "./Api.js"
import {
  CredentialNotFoundError,
  IdempotencyKeyReusedError,
  type InternalServerError,
  internalServerError,
  InvalidRequest,
  JobAlreadyCancelledError,
  JobNotCancellableError,
  type PayloadTooLarge,
  platformUnavailable,
  QuotaExceededError,
  TooManyJobsError
} from "./ApiErrors.js"
import { bodyRejectionOf } from "./requestBody.js"
import { setAnswerHeader } from "./responseHeaders.js"

/**
 * Domain errors → public errors. Each mapping logs what an operator needs (ids, operation,
 * codes), never input, keys or tokens, and answers with fixed or composed public text.
 */

/** Seconds a client waits before retrying a 503 the storage or Redis caused. */
export const storageRetryAfterSeconds = 1

/** Sets `Retry-After` on this request's answer (whatever status it ends with). */
export const retryAfter = (seconds: number) => setAnswerHeader("retry-after", String(seconds))

/** A backing store does not answer: 503 `PLATFORM_UNAVAILABLE` with `Retry-After`. */
export const backingStoreUnavailable = Effect.zipRight(
  retryAfter(storageRetryAfterSeconds),
  Effect.fail(platformUnavailable())
)

/**
 * Storage did not answer: 503 with `Retry-After`. A commit whose outcome is unknown answers the
 * same: a retry with the same `Idempotency-Key` finds the job if the commit did happen.
 */
export const fromPersistence = (error: PersistenceError) =>
  Effect.logWarning(
    error.commitOutcome === "unknown"
      ? "the connection failed during COMMIT (outcome unknown); answering 503"
      : "storage unavailable; answering 503"
  ).pipe(
    Effect.annotateLogs({ operation: error.operation }),
    Effect.zipRight(backingStoreUnavailable)
  )

export const fromTooManyJobs = (error: TooManyJobs) =>
  Effect.fail(
    new TooManyJobsError({
      message: error.requested === undefined
        ? `You already have ${error.limit} queued or running jobs, the most allowed. Wait for one to finish.`
        : `These ${error.requested} jobs would take you past ${error.limit} queued or running jobs, the most allowed. ` +
          "Wait for some to finish, or send fewer."
    })
  )

const secondsPerDay = 86_400

/** 429 with `Retry-After`: the seconds until the quota's UTC day ends. */
export const fromQuotaExceeded = (error: QuotaExceeded) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    Effect.zipRight(
      retryAfter(secondsPerDay - Math.floor(now / 1000) % secondsPerDay),
      Effect.fail(
        new QuotaExceededError({
          message: error.requested === undefined
            ? `You created ${error.limit} jobs today (UTC), your daily quota. Try again tomorrow.`
            : `These ${error.requested} jobs would take you past ${error.limit} jobs today (UTC), your daily quota. ` +
              "Send fewer, or try again tomorrow."
        })
      )
    ))

export const fromInvalidJobInput = (error: InvalidJobInput) =>
  Effect.fail(new InvalidRequest({ message: error.problems.join("; ") }))

export const fromIdempotencyKeyReused = (error: IdempotencyKeyReused) =>
  Effect.logInfo("idempotency key reused with a different request").pipe(
    Effect.annotateLogs({ jobId: error.jobId, jobType: error.jobType }),
    Effect.zipRight(
      Effect.fail(
        new IdempotencyKeyReusedError({
          message: "This Idempotency-Key was already used with a different request. Use a new key for a new request."
        })
      )
    )
  )

export const fromUnknownJobType = (error: Pick<UnknownJobType, "jobType">) =>
  Effect.logError("job type is not registered in this process").pipe(
    Effect.annotateLogs({ jobType: error.jobType }),
    Effect.zipRight(Effect.fail(platformUnavailable()))
  )

export const fromJobNotCancellable = (error: JobNotCancellable) =>
  Effect.fail(new JobNotCancellableError({ message: `The job has already ended (${error.status}).` }))

export const fromJobAlreadyCancelled = (_: JobAlreadyCancelled) =>
  Effect.fail(new JobAlreadyCancelledError({ message: "The job was already cancelled." }))

/** Storing a key: only a malformed key is the caller's fault. */
export const fromStoreCredentialError = (error: CredentialError) =>
  error.code === "CREDENTIAL_INVALID"
    ? Effect.fail(new InvalidRequest({ message: "apiKey: is empty, too long or contains whitespace" }))
    : Effect.logError("a credential could not be stored").pipe(
      Effect.annotateLogs({ code: error.code }),
      Effect.zipRight(Effect.fail(platformUnavailable()))
    )

export const fromCredentialError = (error: CredentialError) => {
  switch (error.code) {
    case "CREDENTIAL_INVALID":
      return Effect.fail(new InvalidRequest({ message: "apiKey: is empty, too long or contains whitespace" }))
    case "CREDENTIAL_NOT_FOUND":
      return Effect.fail(new CredentialNotFoundError({ message: "No active DeepSeek key is stored." }))
    case "CREDENTIAL_MISSING":
      return Effect.logError("credential encryption is not configured").pipe(
        Effect.zipRight(Effect.fail(platformUnavailable()))
      )
    case "CREDENTIAL_DECRYPT_FAILED":
      return Effect.logError("a stored credential cannot be decrypted").pipe(
        Effect.annotateLogs({ code: error.code }),
        Effect.zipRight(Effect.fail(internalServerError()))
      )
  }
}

// ---------------------------------------------------------------------------------------------
// The API-wide error middleware

const isDecodeError = Schema.is(HttpApiError.HttpApiDecodeError)

/**
 * The request schemas (`withValueFreeErrors`) describe a whole failure in one message at the
 * root, naming fields and rules only. An issue anywhere else comes from a schema without that
 * wrapper, whose default message quotes the value: it is answered without its text.
 */
const describeDecodeError = (error: HttpApiError.HttpApiDecodeError): string => {
  const messages = new Set<string>()
  for (const issue of error.issues) {
    messages.add(issue.path.length === 0 ? issue.message : "the request does not match its schema")
  }
  return messages.size === 0 ? "the request does not match its schema" : Array.from(messages).join("; ")
}

/** A body that could not be read as JSON (HttpApiBuilder turns it into a defect). */
const isUnreadableBody = (defect: unknown): boolean =>
  HttpServerError.isServerError(defect) && defect._tag === "RequestError" && defect.reason === "Decode"

/**
 * Wraps every route (inside the error encoder): a Schema decode failure of a path, query,
 * header or body becomes `400 { code: "INVALID_REQUEST", message }` naming the fields, and a
 * defect becomes `500 { code: "INTERNAL_ERROR" }` (logged with its cause, answered without it).
 * Everything else, route-not-found and interruption included, passes through unchanged.
 */
const replaceFailure = (
  cause: Cause.Cause<never>
): Effect.Effect<never, InvalidRequest | PayloadTooLarge | InternalServerError> => {
  if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error: unknown = failure.value
    return isDecodeError(error)
      ? Effect.fail(new InvalidRequest({ message: describeDecodeError(error) }))
      : Effect.failCause(cause)
  }
  const defect = Cause.dieOption(cause)
  if (Option.isSome(defect)) {
    if (isUnreadableBody(defect.value)) return Effect.fail(bodyRejectionOf(defect.value))
    return Effect.logError("unexpected defect in an HTTP handler", cause).pipe(
      Effect.zipRight(Effect.fail(internalServerError()))
    )
  }
  return Effect.failCause(cause)
}

export const ErrorMiddlewareLive = HttpApiBuilder.middleware(
  AiJobApi,
  (app) => Effect.catchAllCause(app, replaceFailure)
)
