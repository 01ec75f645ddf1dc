import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Redacted, Schema } from "effect"
import { mysqlClientLayer } from "../../src/layers/mysql/MysqlDatabase.js"
import { MysqlUnitOfWork } from "../../src/layers/mysql/MysqlUnitOfWork.js"
import { UnitOfWork } from "../../src/services/UnitOfWork.js"
import { scratchMysqlLayer, testServerUrl } from "../support/scratchDatabase.js"

/**
 * The session bounds (lock wait, idle write transaction) hold in every engine transaction, but
 * are sent once per connection, with its first BEGIN, not before every transaction.
 */
const bounds = ConfigProvider.fromMap(
  new Map([["DB_LOCK_WAIT_TIMEOUT_S", "3"], ["DB_IDLE_TRANSACTION_TIMEOUT_S", "7"]])
)

// One connection, so every transaction of a test runs on the same one until it is killed.
const stack = MysqlUnitOfWork.pipe(
  Layer.provideMerge(scratchMysqlLayer("session_bounds", { maxConnections: 1 })),
  Layer.provide(Layer.setConfigProvider(bounds)),
  Layer.orDie
)

const SessionRow = Schema.Struct({
  connection: Schema.Number,
  lockWait: Schema.Number,
  setStatements: Schema.NumberFromString
})
const decodeSession = Schema.decodeUnknown(Schema.Array(SessionRow))

/** What a transaction's session looks like from inside it: its connection, its lock wait, the SETs it has run. */
const sessionInTransaction = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const uow = yield* UnitOfWork
  const rows = yield* uow.transaction(
    sql`SELECT CONNECTION_ID() AS connection, @@session.innodb_lock_wait_timeout AS lock_wait,
          (SELECT variable_value FROM information_schema.session_status WHERE variable_name = 'COM_SET_OPTION') AS set_statements`
  )
  const [session] = yield* decodeSession(rows)
  return session!
}).pipe(Effect.orDie)

const killFromOutside = (connection: number) =>
  Effect.flatMap(SqlClient.SqlClient, (admin) => admin.unsafe(`KILL ${connection}`)).pipe(
    Effect.provide(mysqlClientLayer(Redacted.make(testServerUrl), { maxConnections: 1 })),
    Effect.orDie
  )

describe("MySQL unit of work: session bounds", () => {
  layer(stack, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("are set by a connection's first transaction, kept by the next, set again on a new connection", () =>
      Effect.gen(function*() {
        const first = yield* sessionInTransaction
        expect(first.lockWait).toBe(3)
        const second = yield* sessionInTransaction
        expect(second.connection).toBe(first.connection)
        expect(second.lockWait).toBe(3)
        // No SET ran between the two transactions.
        expect(second.setStatements).toBe(first.setStatements)

        yield* killFromOutside(first.connection)
        // The pool notices the dead connection on its next use; the transaction after it gets a new one.
        const afterKill = yield* Effect.retry(sessionInTransaction.pipe(Effect.sandbox), { times: 3 }).pipe(
          Effect.orDie
        )
        expect(afterKill.connection).not.toBe(first.connection)
        expect(afterKill.lockWait).toBe(3)
      }))
  })
})
