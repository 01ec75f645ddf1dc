import { Schema } from "effect"

/**
 * A storage operation failed (connection lost, deadlock, constraint we did not expect).
 * `@effect/sql`'s `SqlError` is mapped to this so that retries can see it as a value.
 */
export class PersistenceError extends Schema.TaggedError<PersistenceError>()("PersistenceError", {
  operation: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect),
  /**
   * `unknown`: the connection failed during COMMIT, so the transaction may or may not have
   * committed. Never retried blindly; a caller checks what was written (an idempotency key
   * finds a committed job) before doing the work again.
   */
  commitOutcome: Schema.optional(Schema.Literal("unknown")),
  /**
   * A lock wait timed out or a deadlock was broken: the statement (for a deadlock, the whole
   * transaction) was rolled back and nothing of it stands; running the transaction again is safe.
   */
  lockContention: Schema.optional(Schema.Boolean)
}) {}
