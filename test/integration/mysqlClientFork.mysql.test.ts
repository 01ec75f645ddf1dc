import { MysqlClient } from "@effect/sql-mysql2"
import type { Connection } from "@effect/sql/SqlConnection"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Exit, Layer, Redacted, Schema, Scope } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { mirroredSqlMysql2Version, MysqlTransactionConnections } from "../../src/layers/mysql/mysqlClient.js"
import { mysqlClientLayer } from "../../src/layers/mysql/MysqlDatabase.js"
import { driverConnectionOf } from "../../src/layers/mysql/MysqlUnitOfWork.js"
import { repositoryRoot } from "../support/importRules.js"
import { testServerUrl } from "../support/scratchDatabase.js"

/**
 * The engine's MySQL client mirrors one release of `@effect/sql-mysql2`, and the unit of work reads
 * the driver connection from the private `conn` field of the library's connections. An upgrade
 * that changes either fails here, saying what to compare, instead of silently sending every
 * transaction's session bounds again.
 */

const installedVersion = Schema.decodeUnknownSync(Schema.parseJson(Schema.Struct({ version: Schema.String })))(
  readFileSync(join(repositoryRoot, "node_modules/@effect/sql-mysql2/package.json"), "utf8")
).version

const ConnectionId = Schema.Array(Schema.Struct({ id: Schema.Number }))

/** The server's id of the session `conn` runs on, and the driver connection the unit of work would see under it. */
const driverAndSession = (conn: Connection) =>
  Effect.gen(function*() {
    const [row] = yield* Schema.decodeUnknown(ConnectionId)(yield* conn.executeRaw("SELECT CONNECTION_ID() AS id", []))
    return { sessionId: row!.id, driver: driverConnectionOf(conn) }
  })

const threadIdOf = (driver: object | undefined): unknown =>
  driver === undefined ? undefined : Reflect.get(driver, "threadId")

describe("the MySQL client fork", () => {
  it("mirrors the installed @effect/sql-mysql2", () => {
    expect(
      installedVersion,
      `src/layers/mysql/mysqlClient.ts mirrors @effect/sql-mysql2 ${mirroredSqlMysql2Version}, but ${installedVersion} is installed: ` +
        "compare its MysqlClient.make and ConnectionImpl with the fork, check that ConnectionImpl still keeps the mysql2 " +
        "connection in `conn` (MysqlUnitOfWork's driverConnectionOf), then update mirroredSqlMysql2Version"
    ).toBe(mirroredSqlMysql2Version)
  })

  layer(MysqlClient.layer({ url: Redacted.make(testServerUrl), maxConnections: 1 }).pipe(Layer.orDie), {
    timeout: 30_000,
    excludeTestServices: true
  })(
    "on the library's client",
    (it) => {
      it.scoped("the unit of work finds the mysql2 connection under a library connection", () =>
        Effect.gen(function*() {
          const sql = yield* MysqlClient.MysqlClient
          const { driver, sessionId } = yield* driverAndSession(yield* sql.reserve)
          expect(
            threadIdOf(driver),
            `@effect/sql-mysql2 ${installedVersion} no longer keeps the mysql2 connection in ConnectionImpl's private \`conn\` ` +
              `field (as ${mirroredSqlMysql2Version} did): MysqlUnitOfWork's driverConnectionOf must follow it, ` +
              "or every transaction sends its session bounds again"
          ).toBe(sessionId)
        }))
    }
  )

  layer(mysqlClientLayer(Redacted.make(testServerUrl), { maxConnections: 1 }).pipe(Layer.orDie), {
    timeout: 30_000,
    excludeTestServices: true
  })(
    "on the engine's client",
    (it) => {
      it.scoped("the unit of work finds the mysql2 connection under a transaction connection", () =>
        Effect.gen(function*() {
          const connections = yield* MysqlTransactionConnections
          const [scope, connection] = yield* connections.acquire
          yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
          const { driver, sessionId } = yield* driverAndSession(connection)
          expect(threadIdOf(driver)).toBe(sessionId)
        }))
    }
  )
})
