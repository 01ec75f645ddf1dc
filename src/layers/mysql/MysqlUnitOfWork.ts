import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Layer } from "effect"
import { UnitOfWork } from "../../services/UnitOfWork.js"
import { toPersistenceError } from "./sqlErrors.js"

/**
 * `UnitOfWork` as a MySQL transaction (`@effect/sql` nests with savepoints). Repositories take
 * the transaction's connection from the fiber context, so they need no `tx` argument.
 */
export const MysqlUnitOfWork = Layer.effect(
  UnitOfWork,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return UnitOfWork.of({
      transaction: (effect) =>
        Effect.catchIf(
          sql.withTransaction(effect),
          (error): error is SqlError => error instanceof SqlError,
          (error) => Effect.fail(toPersistenceError("transaction")(error))
        )
    })
  })
)
