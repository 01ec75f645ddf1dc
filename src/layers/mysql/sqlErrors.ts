import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
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

export const toPersistenceError = (operation: string) => (error: SqlError) =>
  new PersistenceError({ operation, message: describeSqlError(error), cause: error })

/** Runs one SQL effect with its `SqlError` mapped to our typed `PersistenceError`. */
export const persistence =
  (operation: string) =>
  <A, R>(self: Effect.Effect<A, SqlError, R>): Effect.Effect<A, PersistenceError, R> =>
    Effect.mapError(self, toPersistenceError(operation))
