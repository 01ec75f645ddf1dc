import { Duration, Schedule } from "effect"
import { isExecutionError } from "../domain/ExecutionError.js"
import type { JobDefinition } from "../domain/JobDefinition.js"
import { isRetryable, retryAfterOf } from "../domain/RetryPolicy.js"

/**
 * The retry policy (docs/architecture.md §9.2) as a Schedule, built from the definition:
 * retryable errors are retried up to `maxRetries` times with jittered exponential backoff from
 * `retryBackoff.delay`, never sooner than a provider's `Retry-After`; INTERNAL errors at most
 * once in all. Anything that is not an execution error (a lost lease, say) is never retried.
 */
export const retrySchedule = (definition: JobDefinition): Schedule.Schedule<unknown, unknown> => {
  const { delay } = definition.execution.retryBackoff
  const backoff = Schedule.exponential(Duration.millis(delay)).pipe(
    Schedule.jittered,
    Schedule.intersect(Schedule.recurs(definition.execution.maxRetries))
  )
  const retryable = Schedule.identity<unknown>().pipe(
    Schedule.whileInput((error: unknown) => isExecutionError(error) && isRetryable(error, definition))
  )
  const internalAtMostOnce = Schedule.identity<unknown>().pipe(
    Schedule.reduce(0, (internals, error) => (isExecutionError(error) && error._tag === "InternalError" ? internals + 1 : internals)),
    Schedule.whileOutput((internals) => internals <= 1)
  )
  return Schedule.intersect(backoff, retryable).pipe(
    Schedule.modifyDelay(([, error], computed) => {
      const requested = isExecutionError(error) ? retryAfterOf(error) : undefined
      return requested !== undefined && requested > Duration.toMillis(computed) ? Duration.millis(requested) : computed
    }),
    Schedule.intersect(internalAtMostOnce)
  )
}
