import { NodeContext } from "@effect/platform-node"
import { MysqlClient } from "@effect/sql-mysql2"
import { Effect, Layer, Redacted, type Scope } from "effect"
import { runMigrations } from "../../src/layers/mysql/migrate.js"
import { mysqlClientLayer } from "../../src/layers/mysql/MysqlDatabase.js"

/** The MariaDB the suite runs against; `TEST_DATABASE_URL` points elsewhere. */
export const testServerUrl = process.env.TEST_DATABASE_URL ?? "mysql://root@127.0.0.1:3306/test"

export const databaseUrlFor = (database: string) => {
  const url = new URL(testServerUrl)
  url.pathname = `/${database}`
  return url.toString()
}

const adminLayer = mysqlClientLayer(Redacted.make(testServerUrl), { maxConnections: 2 })

/** A name no other test file will pick: the prefix says which file made it. */
export const scratchDatabaseName = (prefix: string) =>
  `t_${prefix.replace(/[^a-z0-9]/gi, "_").toLowerCase()}_${process.pid}_${Math.floor(Math.random() * 1e9)}`

/**
 * Creates an empty database, yields its URL, and drops it when the scope closes, so every
 * test file owns its tables and leaves nothing behind.
 */
export const acquireScratchDatabase = (prefix: string) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const admin = yield* MysqlClient.MysqlClient
      const name = scratchDatabaseName(prefix)
      yield* admin.unsafe(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`)
      return { name, url: databaseUrlFor(name) }
    }).pipe(Effect.provide(adminLayer), Effect.orDie),
    ({ name }) =>
      Effect.gen(function*() {
        const admin = yield* MysqlClient.MysqlClient
        yield* admin.unsafe(`DROP DATABASE IF EXISTS \`${name}\``)
      }).pipe(Effect.provide(adminLayer), Effect.orDie)
  )

export interface ScratchClientOptions {
  readonly maxConnections?: number
  /** The URL the client connects to instead (e.g. through a proxy); migrations go direct. */
  readonly route?: (url: string) => Effect.Effect<string, never, Scope.Scope>
}

/** A migrated scratch database's client, for `it.layer`. */
export const scratchMysqlLayer = (prefix: string, options: ScratchClientOptions = {}) =>
  Layer.unwrapScoped(
    Effect.gen(function*() {
      const { url } = yield* acquireScratchDatabase(prefix)
      const direct = mysqlClientLayer(Redacted.make(url), options)
      yield* runMigrations.pipe(Effect.provide(Layer.merge(direct, NodeContext.layer)), Effect.orDie)
      return options.route === undefined ? direct : mysqlClientLayer(Redacted.make(yield* options.route(url)), options)
    })
  )
