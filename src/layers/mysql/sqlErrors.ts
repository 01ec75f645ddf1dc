import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Schedule } from "effect"
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
export const isDuplicateKey = (error: SqlError): boolean => driverErrorOf(error).errno === 1062

export const describeSqlError = (error: SqlError): string => {
  const { code, errno } = driverErrorOf(error)
  const cause = error.cause instanceof Error ? error.cause.message : String(error.cause)
  return `${error.message}${code ? ` [${code}${errno ? ` ${errno}` : ""}]` : ""}: ${cause}`
}

/** ER_LOCK_DEADLOCK / ER_LOCK_WAIT_TIMEOUT: InnoDB rolled the statement back; running it again is safe. */
export const isLockContention = (error: SqlError): boolean => {
  const { errno } = driverErrorOf(error)
  return errno === 1213 || errno === 1205
}

export const toPersistenceError = (operation: string) => (error: SqlError) =>
  new PersistenceError({
    operation,
    message: describeSqlError(error),
    cause: error,
    ...(isLockContention(error) ? { lockContention: true } : {})
  })

/** Runs one SQL effect with its `SqlError` mapped to our typed `PersistenceError`. */
export const persistence =
  (operation: string) =>
  <A, R>(self: Effect.Effect<A, SqlError, R>): Effect.Effect<A, PersistenceError, R> =>
    Effect.mapError(self, toPersistenceError(operation))


/**
 * Concurrent claims on one index can deadlock under InnoDB's next-key locks; the victim's
 * transaction was rolled back whole, so it is retried a few times with a short jittered backoff.
 */
export const retryOnLockContention = <A, R>(self: Effect.Effect<A, SqlError, R>): Effect.Effect<A, SqlError, R> =>
  Effect.retry(self, {
    while: isLockContention,
    schedule: Schedule.exponential("5 millis").pipe(Schedule.jittered, Schedule.intersect(Schedule.recurs(8)))
  })
