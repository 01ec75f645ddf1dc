import { SqlClient } from "@effect/sql"
import { Effect, Layer, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { mysqlClientLayer } from "../src/layers/mysql/MysqlDatabase.js"
import { describeDatabaseUrl, withDatabase } from "./databaseTarget.js"
import { DatabaseUnreachable, ScratchDatabaseFailed } from "./errors.js"

export interface ScratchDatabase {
  readonly name: string
  readonly url: Redacted.Redacted<string>
}

/** A name that says who made it (so a leftover can be traced) and cannot collide with a parallel run. */
const scratchDatabaseName = Effect.sync(() => `migrations_check_${randomUUID().replace(/-/g, "").slice(0, 16)}`)

/**
 * Creates an empty database on the server of `serverUrl` and drops it when the scope closes,
 * whether the check passed, failed or was interrupted. The admin connection names no database,
 * so the one in `serverUrl` need not exist yet (a fresh CI server has none).
 */
export const acquireScratchDatabase = (serverUrl: Redacted.Redacted<string>) =>
  Effect.gen(function*() {
    const serverOnly = withDatabase(serverUrl, "")
    const adminContext = yield* Layer.build(
      mysqlClientLayer(serverOnly, { maxConnections: 1 }).pipe(
        Layer.mapError((cause) => new DatabaseUnreachable({ target: describeDatabaseUrl(serverOnly), cause }))
      )
    )
    const admin = SqlClient.SqlClient.pipe(Effect.provide(adminContext))
    const name = yield* scratchDatabaseName

    return yield* Effect.acquireRelease(
      admin.pipe(
        Effect.flatMap((sql) => sql.unsafe(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`)),
        Effect.mapError((cause) => new ScratchDatabaseFailed({ action: "create", database: name, cause })),
        Effect.as<ScratchDatabase>({ name, url: withDatabase(serverUrl, name) })
      ),
      () =>
        admin.pipe(
          Effect.flatMap((sql) => sql.unsafe(`DROP DATABASE IF EXISTS \`${name}\``)),
          // A failed drop must not hide the check's own result: say what to clean up by hand.
          Effect.catchAll((cause) =>
            Effect.logWarning(new ScratchDatabaseFailed({ action: "drop", database: name, cause }).message)
          )
        )
    )
  })
