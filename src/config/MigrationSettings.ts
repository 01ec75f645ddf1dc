import { Config, Context, Layer } from "effect"

/** `MIGRATE_ON_START` (default true): whether a process applies pending migrations before anything else starts. */
export class MigrationSettings extends Context.Tag("ai-job-engine/MigrationSettings")<
  MigrationSettings,
  { readonly migrateOnStart: boolean }
>() {
  static readonly config = Config.all({
    migrateOnStart: Config.boolean("MIGRATE_ON_START").pipe(Config.withDefault(true))
  })
  static readonly layer = Layer.effect(MigrationSettings, MigrationSettings.config)
}
