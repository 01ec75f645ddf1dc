import { Context, type Effect } from "effect"
import type { PersistenceError } from "../domain/PersistenceError.js"

/**
 * One storage transaction. Repository calls made inside `transaction` commit together or not at
 * all. MySQL runs it as a database transaction; the memory store as a serialized copy-on-write.
 * A nested call is a savepoint: its failure undoes only its own writes.
 */
export class UnitOfWork extends Context.Tag("ai-job-engine/UnitOfWork")<
  UnitOfWork,
  {
    readonly transaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | PersistenceError, R>
  }
>() {}
