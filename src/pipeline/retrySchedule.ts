import { Duration, Effect, Schedule } from "effect"
import { isExecutionError } from "../domain/ExecutionError.js"
import type { JobDefinition } from "../domain/JobDefinition.js"
import { isRetryable, retryAfterOf } from "../domain/RetryPolicy.js"
import { engineRetries, increment } from "../services/EngineMetrics.js"

/**
 * The retry policy (docs/architecture.md §9.2) as a Schedule, built from the definition:
 * retryable errors are retried up to `maxRetries` times with jittered exponential backoff from
 * `retryBackoff.delay`, never sooner than a provider's `Retry-After`; INTERNAL errors at most
 * once in all. Anything that is not an execution error (a lost lease, say) is never retried.
 */
export const retrySchedule = (definition: JobDefinition): Schedule.Schedule<unknown, unknown> => {
  // A schedule is a description (its state lives in each run), so one per definition serves every job.
  const built = schedulesByDefinition.get(definition)
  if (built !== undefined) return built
  const schedule = buildRetrySchedule(definition)
  schedulesByDefinition.set(definition, schedule)
  return schedule
}

const schedulesByDefinition = new WeakMap<JobDefinition, Schedule.Schedule<unknown, unknown>>()

const buildRetrySchedule = (definition: JobDefinition): Schedule.Schedule<unknown, unknown> => {
  const { delay } = definition.execution.retryBackoff
  const backoff = Schedule.exponential(Duration.millis(delay)).pipe(
    Schedule.jittered,
    Schedule.intersect(Schedule.recurs(definition.execution.maxRetries))
  )
  const retryable = Schedule.identity<unknown>().pipe(
    Schedule.whileInput((error: unknown) => isExecutionError(error) && isRetryable(error, definition))
  )
  const isInternal = (error: unknown) => isExecutionError(error) && error._tag === "InternalError"
  const internalAtMostOnce = Schedule.identity<unknown>().pipe(
    Schedule.reduce(0, (internals, error) => (isInternal(error) ? internals + 1 : internals)),
    // `reduce` outputs the count before this input: this error is added before judging.
    Schedule.intersect(Schedule.identity<unknown>()),
    Schedule.whileOutput(([before, error]) => before + (isInternal(error) ? 1 : 0) <= 1)
  )
  return Schedule.intersect(backoff, retryable).pipe(
    Schedule.modifyDelay(([, error], computed) => {
      const requested = isExecutionError(error) ? retryAfterOf(error) : undefined
      return requested !== undefined && requested > Duration.toMillis(computed) ? Duration.millis(requested) : computed
    }),
    Schedule.intersect(internalAtMostOnce)
  )
}

/**
 * `schedule` with each retry it grants logged (its delay and the error code) and counted: an
 * operator sees why a job made several provider calls, and the line is an event on the span of
 * the attempt that failed.
 */
export const loggedRetries = (
  schedule: Schedule.Schedule<unknown, unknown>,
  jobType: string
): Schedule.Schedule<unknown, unknown> => {
  const byJobType = loggedBySchedule.get(schedule) ?? new Map<string, Schedule.Schedule<unknown, unknown>>()
  loggedBySchedule.set(schedule, byJobType)
  const built = byJobType.get(jobType)
  if (built !== undefined) return built
  const logged = buildLoggedRetries(schedule, jobType)
  byJobType.set(jobType, logged)
  return logged
}

const loggedBySchedule = new WeakMap<
  Schedule.Schedule<unknown, unknown>,
  Map<string, Schedule.Schedule<unknown, unknown>>
>()

const buildLoggedRetries = (
  schedule: Schedule.Schedule<unknown, unknown>,
  jobType: string
): Schedule.Schedule<unknown, unknown> =>
  Schedule.delays(schedule).pipe(
    Schedule.intersect(Schedule.identity<unknown>()),
    Schedule.onDecision(([delay, error], decision): Effect.Effect<void> => {
      if (decision._tag === "Done") return Effect.void
      const errorCode = isExecutionError(error) ? error.code : "INTERNAL_ERROR"
      return increment(engineRetries, { job_type: jobType, error_code: errorCode }).pipe(
        Effect.zipRight(
          Effect.logWarning("provider call failed, retrying").pipe(
            Effect.annotateLogs({ delayMs: Math.round(Duration.toMillis(delay)), errorCode })
          )
        )
      )
    })
  )
