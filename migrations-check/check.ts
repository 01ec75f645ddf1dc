import { Effect, Layer, type Redacted } from "effect"
import { runMigrations } from "../src/layers/mysql/migrate.js"
import { mysqlClientLayer } from "../src/layers/mysql/MysqlDatabase.js"
import { compareSchemas, type SchemaDifference } from "./compare.js"
import { describeDatabaseUrl } from "./databaseTarget.js"
import { declaredSchema } from "./DeclaredSchema.js"
import { DatabaseUnreachable, MigrationsFailed } from "./errors.js"
import { introspectCurrentDatabase } from "./introspect.js"
import type { CheckSubject } from "./report.js"
import { acquireScratchDatabase } from "./scratchDatabase.js"

export interface CheckOutcome {
  readonly subject: CheckSubject
  readonly differences: ReadonlyArray<SchemaDifference>
}

const clientFor = (url: Redacted.Redacted<string>) =>
  mysqlClientLayer(url, { maxConnections: 2 }).pipe(
    Layer.mapError((cause) => new DatabaseUnreachable({ target: describeDatabaseUrl(url), cause }))
  )

const migrationName = ([id, name]: readonly [number, string]) => `${String(id).padStart(4, "0")}_${name}`

/**
 * Default mode: do the migrations build the schema the code declares? Builds a scratch database
 * on the server of `serverUrl` from every migration, compares it, and drops it again.
 */
export const checkMigrationsBuildDeclaredSchema = (serverUrl: Redacted.Redacted<string>) =>
  Effect.scoped(
    Effect.gen(function*() {
      const scratch = yield* acquireScratchDatabase(serverUrl)
      const target = describeDatabaseUrl(scratch.url)
      return yield* Effect.gen(function*() {
        const applied = yield* runMigrations.pipe(Effect.mapError((cause) => new MigrationsFailed({ target, cause })))
        const schema = yield* introspectCurrentDatabase
        return {
          subject: {
            mode: "migrations",
            target,
            serverVersion: schema.serverVersion,
            appliedMigrations: applied.map(migrationName)
          },
          differences: compareSchemas(declaredSchema, schema)
        } satisfies CheckOutcome
      }).pipe(Effect.provide(clientFor(scratch.url)))
    })
  ).pipe(Effect.withSpan("migrationsCheck.migrations"))

/** `--live`: does the database at `databaseUrl`, as it stands, have the schema the code declares? */
export const checkLiveDatabase = (databaseUrl: Redacted.Redacted<string>) =>
  introspectCurrentDatabase.pipe(
    Effect.map((schema): CheckOutcome => ({
      subject: {
        mode: "live",
        target: describeDatabaseUrl(databaseUrl),
        serverVersion: schema.serverVersion,
        appliedMigrations: []
      },
      // A deployed database is usually shared with the rest of the application: tables the
      // engine does not declare are none of its business there (a scratch build still flags them).
      differences: compareSchemas(declaredSchema, schema).filter((difference) => difference._tag !== "UndeclaredTable")
    })),
    Effect.provide(clientFor(databaseUrl)),
    Effect.withSpan("migrationsCheck.live")
  )
