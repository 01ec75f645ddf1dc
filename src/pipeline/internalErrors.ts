import { Cause, Effect } from "effect"
import { InternalError } from "../domain/ExecutionError.js"
import type { PersistenceError } from "../domain/PersistenceError.js"

/**
 * A storage failure inside a stage is an INTERNAL error of the job (retried once):
 * `Effect.catchTag("PersistenceError", persistenceAsInternal)`.
 */
export const persistenceAsInternal = (error: PersistenceError) =>
  Effect.fail(new InternalError({ code: "INTERNAL_PERSISTENCE", message: `${error.operation}: ${error.message}` }))

/** A defect (a bug) inside a stage becomes an INTERNAL error, so the job fails instead of hanging. */
export const defectsAsInternal = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | InternalError, R> =>
  Effect.catchAllDefect(self, (defect) =>
    Effect.fail(
      new InternalError({
        code: "INTERNAL_ERROR",
        message: `defect: ${Cause.pretty(Cause.die(defect)).split("\n")[0] ?? ""}`
      })
    ))
