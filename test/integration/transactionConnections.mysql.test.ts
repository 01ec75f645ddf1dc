import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Exit, Layer, Redacted, Schema } from "effect"
import { mysqlClientLayer } from "../../src/layers/mysql/MysqlDatabase.js"
import { MysqlUnitOfWork } from "../../src/layers/mysql/MysqlUnitOfWork.js"
import { UnitOfWork } from "../../src/services/UnitOfWork.js"
import { databaseUrlFor, scratchMysqlLayer } from "../support/scratchDatabase.js"

/**
 * Engine transactions run on connections of their own whose autocommit is off, so none of them
 * sends BEGIN; standalone statements still commit one by one, and a failed transaction still
 * leaves nothing behind.
 */

// One connection in each pool, so every transaction of a test runs on the same connection.
const stack = MysqlUnitOfWork.pipe(
  Layer.provideMerge(scratchMysqlLayer("transaction_connections", { maxConnections: 1 })),
  Layer.orDie
)

const Session = Schema.Struct({ connection: Schema.Number, autocommit: Schema.Number, begins: Schema.NumberFromString })
const decodeSession = Schema.decodeUnknown(Schema.Array(Session))
const Gate = Schema.Array(Schema.Struct({ userId: Schema.String }))
const DatabaseName = Schema.Array(Schema.Struct({ name: Schema.String }))

const sessionNow = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql`SELECT CONNECTION_ID() AS connection, @@session.autocommit AS autocommit,
    (SELECT variable_value FROM information_schema.session_status WHERE variable_name = 'COM_BEGIN') AS begins`
  return (yield* decodeSession(rows))[0]!
})

/** The gate rows of `userId` as another process sees them: on a client of its own. */
const seenFromOutside = (userId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [database] = yield* Schema.decodeUnknown(DatabaseName)(yield* sql`SELECT DATABASE() AS name`)
    return yield* Effect.gen(function*() {
      const outside = yield* SqlClient.SqlClient
      return (yield* Schema.decodeUnknown(Gate)(
        yield* outside`SELECT user_id FROM ai_user_job_gate WHERE user_id = ${userId}`
      )).length
    }).pipe(Effect.provide(mysqlClientLayer(Redacted.make(databaseUrlFor(database!.name)), { maxConnections: 1 })))
  })

const touchGate = (userId: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql`INSERT INTO ai_user_job_gate (user_id, updated_at) VALUES (${userId}, UTC_TIMESTAMP(3))`
  )

describe("MySQL unit of work: transaction connections", () => {
  layer(stack, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("transactions send no BEGIN, commit what they wrote, and roll back what failed", () =>
      Effect.gen(function*() {
        const uow = yield* UnitOfWork
        const first = yield* uow.transaction(Effect.zipLeft(sessionNow, touchGate("committed")))
        const second = yield* uow.transaction(sessionNow)
        expect(second.connection).toBe(first.connection)
        expect(first.autocommit).toBe(0)
        expect(first.begins).toBe(0)
        expect(second.begins).toBe(0)
        expect(yield* seenFromOutside("committed")).toBe(1)

        const failed = yield* uow.transaction(
          Effect.zipRight(touchGate("rolled-back"), Effect.fail("refused" as const))
        ).pipe(Effect.exit)
        expect(Exit.isFailure(failed)).toBe(true)
        expect(yield* seenFromOutside("rolled-back")).toBe(0)
        const third = yield* uow.transaction(sessionNow)
        expect(third.connection).toBe(first.connection)
        expect(third.begins).toBe(0)
      }).pipe(Effect.orDie))

    it.effect("a standalone statement is not held in a transaction: it commits at once", () =>
      Effect.gen(function*() {
        const uow = yield* UnitOfWork
        yield* uow.transaction(touchGate("inside"))
        yield* touchGate("standalone")
        const session = yield* sessionNow
        expect(session.autocommit).toBe(1)
        expect(yield* seenFromOutside("standalone")).toBe(1)
      }).pipe(Effect.orDie))
  })
})
