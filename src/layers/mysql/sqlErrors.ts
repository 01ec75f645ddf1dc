import { SqlError } from "@effect/sql/SqlError"
import { Effect, ParseResult, Schedule } from "effect"
import { failedPaths } from "../../domain/JobType.js"
import { PersistenceError } from "../../domain/PersistenceError.js"

/** The mysql2 error behind an `SqlError`, when there is one. */
const driverErrorOf = (error: SqlError): { readonly errno?: number; readonly code?: string } => {
  const cause: unknown = error.cause
  if (typeof cause === "object" && cause !== null) {
    const errno = "errno" in cause && typeof cause.errno === "number" ? cause.errno : undefined
    const code = "code" in cause && typeof cause.code === "string" ? cause.code : undefined
    return { errno, code }
  }
  return {}
}

/** ER_DUP_ENTRY: a unique key refused the row (MySQL does not abort the transaction for it). */
export const isDuplicateKey = (error: unknown): error is SqlError =>
  error instanceof SqlError && driverErrorOf(error).errno === 1062

export const describeSqlError = (error: SqlError): string => {
  const { code, errno } = driverErrorOf(error)
  const cause = error.cause instanceof Error ? error.cause.message : String(error.cause)
  return `${error.message}${code ? ` [${code}${errno ? ` ${errno}` : ""}]` : ""}: ${cause}`
}

/** ER_LOCK_DEADLOCK / ER_LOCK_WAIT_TIMEOUT: InnoDB rolled the statement back; running it again is safe. */
export const isLockContention = (error: unknown): boolean => {
  if (!(error instanceof SqlError)) return false
  const { errno } = driverErrorOf(error)
  return errno === 1213 || errno === 1205
}

/** What a repository statement can fail with before it is mapped: the driver, or a row / request schema. */
type StorageFailure = SqlError | ParseResult.ParseError

const isStorageFailure = (error: unknown): error is StorageFailure =>
  error instanceof SqlError || ParseResult.isParseError(error)

export const toPersistenceError = (operation: string) => (error: StorageFailure): PersistenceError =>
  error instanceof SqlError
    ? new PersistenceError({
      operation,
      message: describeSqlError(error),
      cause: error,
      ...(isLockContention(error) ? { lockContention: true } : {})
    })
    // Paths only: a row may hold ciphertext or a user's input, which has no business in an error.
    : new PersistenceError({ operation, message: `row or request does not fit its schema at ${failedPaths(error)}` })

/**
 * The one way a repository's SQL failure becomes the engine's typed `PersistenceError` (named
 * after `operation`): the driver's `SqlError` and a row or request that does not fit its
 * `SqlSchema`. Every other error in the channel passes through untouched.
 */
export const persistence = (operation: string) =>
<A, E, R>(
  self: Effect.Effect<A, E | StorageFailure, R>
): Effect.Effect<A, Exclude<E, StorageFailure> | PersistenceError, R> =>
  Effect.catchIf(
    self,
    isStorageFailure,
    (error) => Effect.fail(toPersistenceError(operation)(error))
  )

/**
 * The one retry for lock contention. InnoDB already rolled the victim back whole (a deadlock
 * takes the transaction, a lock wait timeout the statement), so running it again is safe. Four
 * tries with a short jittered backoff (10 ms doubling, about 150 ms in all) clear a burst of
 * deadlocks on a hot index; every caller has an outer recovery beyond that (the dispatcher claims
 * again at its next poll, a create answers 503, PROJECT retries lock waits within its lease), so
 * a longer budget would only hold a connection: after a lock wait timeout each try has already
 * waited `DB_LOCK_WAIT_TIMEOUT_S`.
 */
export const lockContentionSchedule = Schedule.exponential("10 millis").pipe(
  Schedule.jittered,
  Schedule.intersect(Schedule.recurs(4))
)

/**
 * `Effect.retry(self, { while: isLockContention, schedule: lockContentionSchedule })`, with the
 * schedule's driver built only once a try has lost to lock contention: nearly every transaction
 * never does, and building it costs more than the rest of the wrapping.
 */
export const retryOnLockContention = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.catchIf(
    self,
    isLockContention,
    (first) =>
      Effect.flatMap(Schedule.driver(lockContentionSchedule), (driver) => {
        const retryAfter = (error: E): Effect.Effect<A, E, R> =>
          Effect.matchEffect(driver.next(error), {
            // The schedule is spent: the last try's error is the answer.
            onFailure: () => Effect.fail(error),
            onSuccess: () => Effect.catchIf(self, isLockContention, retryAfter)
          })
        return retryAfter(first)
      })
  )
