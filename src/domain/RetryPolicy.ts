import { categoryOf, type ExecutionError } from "./ExecutionError.js"
import type { JobDefinition } from "./JobDefinition.js"

/** INTERNAL is retryable, but the engine's schedule allows it only once. */
export const isRetryable = (error: ExecutionError, definition: JobDefinition): boolean => {
  switch (categoryOf(error)) {
    case "PROVIDER":
      // The same request would be refused again: only another target (a fallback) can serve it.
      return error.code !== "PROVIDER_REQUEST_REJECTED"
    case "VALIDATION":
    case "INTERNAL":
      return true
    case "TIMEOUT":
      return definition.execution.abortStrategy === "retry"
    case "CONTENT_SAFETY":
    case "CREDENTIAL":
    case "CANCELLED":
      return false
  }
}

export const retryAfterOf = (error: ExecutionError): number | undefined =>
  error._tag === "ProviderError" ? error.retryAfterMs : undefined
