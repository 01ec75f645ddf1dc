/**
 * `npm run migrations-check [-- --live]`: proves the schema the code declares is the schema the
 * migrations build (default), or the schema a deployed database has (`--live`). Prints a
 * readable diff; exits non-zero on any drift.
 */
import { Command, Options } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { Console, Effect, Option } from "effect"
import { checkLiveDatabase, checkMigrationsBuildDeclaredSchema } from "../../migrations-check/check.js"
import { isDrift } from "../../migrations-check/compare.js"
import { defaultServerUrl } from "../../migrations-check/databaseTarget.js"
import { SchemaDriftDetected } from "../../migrations-check/errors.js"
import { renderReport } from "../../migrations-check/report.js"
import { StorageConfig } from "../config/EngineConfig.js"
import { runOnce } from "./runProcess.js"

const live = Options.boolean("live").pipe(
  Options.withDescription("Compare the database at DATABASE_URL as it stands; apply nothing")
)

const migrationsCheck = Command.make("migrations-check", { live }, ({ live }) =>
  Effect.gen(function*() {
    // Reading DATABASE_URL through StorageConfig rejects a malformed URL with a message naming it.
    const { databaseUrl } = yield* StorageConfig.config
    const outcome = live
      ? yield* checkLiveDatabase(Option.getOrElse(databaseUrl, () => defaultServerUrl))
      : yield* checkMigrationsBuildDeclaredSchema(Option.getOrElse(databaseUrl, () => defaultServerUrl))

    yield* Console.log(renderReport(outcome.subject, outcome.differences))

    const driftCount = outcome.differences.filter(isDrift).length
    if (driftCount > 0) {
      return yield* new SchemaDriftDetected({ target: outcome.subject.target, driftCount })
    }
  }))

const cli = Command.run(migrationsCheck, { name: "migrations-check", version: "0.1.0" })

runOnce("migrations-check", cli(process.argv).pipe(Effect.provide(NodeContext.layer)), {
  // @effect/cli has already printed its own usage errors.
  otherwise: () => "invalid arguments"
})
