import { SqlClient, SqlSchema } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect, Layer, Option, Ref, Schema, Scope } from "effect"
import { DatabaseSessionConfig } from "../../config/EngineConfig.js"
import { PersistenceError } from "../../domain/PersistenceError.js"
import { UnitOfWork } from "../../services/UnitOfWork.js"
import { MysqlTransactionConnections } from "./mysqlClient.js"
import { describeSqlError, retryOnLockContention, toPersistenceError } from "./sqlErrors.js"

/**
 * `@effect/sql` turns a failed COMMIT or ROLLBACK into a defect. A failed COMMIT (the body had
 * succeeded) leaves the outcome unknown: the server may have committed before the connection
 * went. Both become typed `PersistenceError`s, the first marked `commitOutcome: "unknown"`.
 */
const withCommitOutcome = <A, E, R>(
  withTransaction: <A1, E1, R1>(self: Effect.Effect<A1, E1, R1>) => Effect.Effect<A1, E1 | SqlError, R1>,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E | SqlError | PersistenceError, R> =>
  Effect.flatMap(
    Ref.make(false),
    (bodySucceeded) =>
      withTransaction(Effect.tap(effect, () => Ref.set(bodySucceeded, true))).pipe(
        Effect.catchSomeDefect((defect) =>
          defect instanceof SqlError
            ? Option.some(
              Effect.flatMap(Ref.get(bodySucceeded), (committing) =>
                Effect.fail(
                  committing
                    ? new PersistenceError({
                      operation: "transaction.commit",
                      message: describeSqlError(defect),
                      cause: defect,
                      commitOutcome: "unknown"
                    })
                    : toPersistenceError("transaction.rollback")(defect)
                ))
            )
            : Option.none()
        )
      )
  )

/**
 * The session bounds every engine transaction runs under, sent with a connection's first
 * transaction in one round trip. MariaDB also kills a write transaction left idle too long; the server is asked once
 * whether it has that setting (MySQL does not).
 */
const sessionBounds = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const bounds = yield* DatabaseSessionConfig.config.pipe(Effect.orDie)
  // Only whether there is a row matters.
  const found = yield* SqlSchema.findAll({
    Request: Schema.Void,
    Result: Schema.Unknown,
    execute: () => sql`SHOW VARIABLES LIKE 'idle_write_transaction_timeout'`
  })(undefined).pipe(Effect.orDie)
  // Both server variables take whole seconds.
  const settings = [`innodb_lock_wait_timeout = ${Duration.toSeconds(bounds.lockWaitTimeout)}`]
  if (found.length > 0) {
    settings.push(`idle_write_transaction_timeout = ${Duration.toSeconds(bounds.idleTransactionTimeout)}`)
  }
  return `SET SESSION ${settings.join(", ")}`
})

/**
 * The driver's connection under an `@effect/sql-mysql2` one (its `conn` field, private in the
 * library's 0.53.0 `ConnectionImpl`, public in the engine's client): the pool hands the same one out
 * again and again, so it is what session settings belong to. Undefined if a later version hides
 * it: every transaction then sends its session bounds again (test/integration/mysqlClientFork.mysql.test.ts fails).
 */
export const driverConnectionOf = (conn: Connection): object | undefined => {
  const driver: unknown = (conn as unknown as { readonly conn?: unknown }).conn
  return typeof driver === "object" && driver !== null ? driver : undefined
}

/** A `sql.transaction` span attribute: `implicit` when the transaction was opened by its first statement, without BEGIN. */
export const implicitBeginAttribute = "db.transaction.begin"

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
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bounds = yield* sessionBounds
    const unprepared = (statement: string) => (conn: Connection) =>
      Effect.asVoid(conn.executeUnprepared(statement, [], undefined))
    // The engine's client keeps transactions on connections of their own (see
    // `MysqlTransactionConnections`): their autocommit goes off with the session bounds, and no
    // transaction on them sends BEGIN. Another client's pooled connections get BEGIN each time.
    const dedicated = yield* Effect.serviceOption(MysqlTransactionConnections)
    const implicitBegin = Option.isSome(dedicated)
    // Session settings outlive a transaction: a connection gets them with its first transaction only,
    // and one the pool replaced (closed, killed) is a new driver connection that gets them again.
    const bounded = new WeakSet<object>()
    const firstBegin = implicitBegin ? `${bounds}, autocommit = 0` : `${bounds}; BEGIN`
    const begin = (conn: Connection) => {
      const driver = driverConnectionOf(conn)
      if (driver !== undefined && bounded.has(driver)) return implicitBegin ? Effect.void : unprepared("BEGIN")(conn)
      return Effect.tap(unprepared(firstBegin)(conn), () => {
        if (driver !== undefined) bounded.add(driver)
      })
    }
    const withTransaction = SqlClient.makeWithTransaction({
      transactionTag: SqlClient.TransactionConnection,
      // Says on the `sql.transaction` span that no BEGIN was sent (the bench counts statements by it).
      spanAttributes: implicitBegin ? [[implicitBeginAttribute, "implicit"]] : [],
      acquireConnection: Option.match(dedicated, {
        onNone: () =>
          Effect.flatMap(
            Scope.make(),
            (scope) => Effect.map(Scope.extend(sql.reserve, scope), (conn) => [scope, conn] as const)
          ),
        onSome: (connections) => connections.acquire
      }),
      begin,
      savepoint: (conn, id) => unprepared(`SAVEPOINT effect_sql_${id}`)(conn),
      commit: unprepared("COMMIT"),
      rollback: unprepared("ROLLBACK"),
      rollbackSavepoint: (conn, id) => unprepared(`ROLLBACK TO SAVEPOINT effect_sql_${id}`)(conn)
    })
    return UnitOfWork.of({
      transaction: (effect) =>
        Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) => {
          const once = withCommitOutcome(withTransaction, effect)
          const attempt = Option.isNone(outer) ? retryOnLockContention(once) : once
          // Only the driver's own errors: whatever else the body fails with (a schema's
          // ParseError included) is the caller's, untouched.
          return Effect.catchIf(
            attempt,
            (error): error is SqlError => error instanceof SqlError,
            (error) => Effect.fail(toPersistenceError("transaction")(error))
          )
        })
    })
  })
)
