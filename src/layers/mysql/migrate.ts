import { MysqlMigrator } from "@effect/sql-mysql2"
import { Effect } from "effect"
import { migrations, migrationsTable } from "../../../migrations/index.js"

/** Applies every pending migration; returns the ones it ran as `[id, name]`. */
export const runMigrations = MysqlMigrator.run({ loader: migrations, table: migrationsTable }).pipe(
  Effect.withSpan("migrations.run")
)
