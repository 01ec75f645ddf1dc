import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Layer, Option, Schedule } from "effect"
import { UnitOfWork } from "../../services/UnitOfWork.js"
import { isLockContention, toPersistenceError } from "./sqlErrors.js"

/**
 * `UnitOfWork` as a MySQL transaction (`@effect/sql` nests with savepoints). Repositories take
 * the transaction's connection from the fiber context, so they need no `tx` argument.
 *
 * InnoDB answers a deadlock by rolling the whole transaction back ("try restarting
 * transaction"), so an outermost transaction that lost one runs again from the start, a few
 * times; a nested one cannot (its savepoint went with the rollback) and passes it up.
 */
export const MysqlUnitOfWork = Layer.effect(
  UnitOfWork,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return UnitOfWork.of({
      transaction: (effect) =>
        Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) => {
          const once = sql.withTransaction(effect)
          const attempt = Option.isNone(outer)
            ? Effect.retry(once, {
              while: (error) => error instanceof SqlError && isLockContention(error),
              schedule: Schedule.exponential("10 millis").pipe(Schedule.jittered, Schedule.intersect(Schedule.recurs(4)))
            })
            : once
          return Effect.catchIf(
            attempt,
            (error): error is SqlError => error instanceof SqlError,
            (error) => Effect.fail(toPersistenceError("transaction")(error))
          )
        })
    })
  })
)
