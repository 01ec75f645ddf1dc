/**
 * `npm run migrate`: applies every pending migration to the database at `DATABASE_URL`.
 * Safe to run again: a database that is up to date is left as it is.
 */
import { NodeContext } from "@effect/platform-node"
import { Data, Effect, Layer, Option, type Redacted } from "effect"
import { StorageConfig } from "../config/EngineConfig.js"
import { runMigrations } from "../layers/mysql/migrate.js"
import { MysqlFromConfig, parseDatabaseUrl } from "../layers/mysql/MysqlDatabase.js"
import { runOnce } from "./runProcess.js"

/** Migrating is the one thing this program does: without a database it has nothing to do. */
class DatabaseUrlMissing extends Data.TaggedError("DatabaseUrlMissing") {
  override get message() {
    return "DATABASE_URL is not set: give the database to migrate as mysql://user:password@host:port/database"
  }
}

/** Which database is being migrated, without the password. */
const describeTarget = (url: Redacted.Redacted<string>) => {
  const parts = parseDatabaseUrl(url)
  return `${parts.username}@${parts.host}:${parts.port}/${parts.database}`
}

const migrationName = ([id, name]: readonly [number, string]) => `${String(id).padStart(4, "0")}_${name}`

const applyPendingMigrations = Effect.gen(function*() {
  const { databaseUrl } = yield* StorageConfig
  // Checked before MysqlFromConfig is built, which would only die (a defect) on a missing URL.
  const url = yield* Option.match(databaseUrl, {
    onNone: () => Effect.fail(new DatabaseUrlMissing()),
    onSome: Effect.succeed
  })
  const target = describeTarget(url)

  const applied = yield* runMigrations.pipe(Effect.provide(MysqlFromConfig))

  if (applied.length === 0) {
    yield* Effect.logInfo(`No pending migrations: ${target} is up to date`)
  } else {
    for (const migration of applied) {
      yield* Effect.logInfo(`Applied migration ${migrationName(migration)}`)
    }
    yield* Effect.logInfo(`Applied ${applied.length} migration(s) to ${target}`)
  }
})

runOnce(
  "migrate",
  // StorageConfig is provided inside, so a bad DATABASE_URL (rejected while it is built) is reported too.
  applyPendingMigrations.pipe(Effect.provide(Layer.merge(StorageConfig.layer, NodeContext.layer)))
)
