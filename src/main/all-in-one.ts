/**
 * `npm start`: the whole engine in one process: HTTP API, outbox dispatcher, workers on both
 * queues, and the lock reaper.
 *
 * With `DATABASE_URL` and `REDIS_URL` unset it runs embedded: in-memory storage and queues, the
 * synthetic AI provider (the real one when `AI_API_KEY` is set), a JWT secret generated for the
 * run, and it prints ready-made tokens and a `curl` to try. With `AUTH_JWT_SECRET` set it uses
 * that secret and prints no token, only how to mint one (`npm run token`). With both set it applies pending
 * migrations (`MIGRATE_ON_START`, default true) and runs on MySQL and Redis.
 */
import { NodeContext } from "@effect/platform-node"
import { Config, ConfigProvider, Console, Effect, Layer, Option, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { ApiSettings } from "../config/ApiSettings.js"
import { signToken } from "../http/AuthTokens.js"
import { httpTransportConfig } from "../config/HttpTransportSettings.js"
import { ReadinessProbeLive, ReadinessProbeMemory } from "./AppLayers.js"
import { nodeApiServer } from "../http/server.js"
import { ConfigLive, EngineServicesLive, LiveInfrastructure, MemoryInfrastructure } from "./AppLayers.js"
import { HttpConfig, ProviderConfig, StorageConfig } from "../config/EngineConfig.js"
import { runMigrations } from "../layers/mysql/migrate.js"
import { MysqlFromConfig } from "../layers/mysql/MysqlDatabase.js"
import { OutboxDispatcherLive } from "../pipeline/dispatcher.js"
import { WorkerServiceLive } from "../pipeline/worker.js"
import { runProcess } from "./runProcess.js"

const migrateOnStartConfig = Config.boolean("MIGRATE_ON_START").pipe(Config.withDefault(true))

/** The three parts of the engine over whatever services are below them. */
const engineParts = (port: number) => Layer.mergeAll(nodeApiServer({ port }), OutboxDispatcherLive, WorkerServiceLive)

const sampleFlashcardRequest = JSON.stringify({
  sourceText:
    "The mitochondrion is the powerhouse of the cell. It produces ATP through cellular respiration. Ribosomes build proteins.",
  count: 3
})

/** Where the tokens of the banner come from: a secret made for this run, or the operator's. */
type BannerSecret =
  | { readonly _tag: "GeneratedForThisRun"; readonly secret: Redacted.Redacted<string> }
  | { readonly _tag: "Configured" }

/** The lines that give a newcomer tokens: only a secret generated here may sign them in public. */
const tokenLines = (secret: BannerSecret) =>
  Effect.gen(function* () {
    if (secret._tag === "Configured") {
      return {
        bearer: "$TOKEN",
        lines: [
          "  AUTH_JWT_SECRET is set: no token is printed (it would be valid wherever that secret is).",
          "  Mint one signed with it:  export TOKEN=$(npm run --silent token -- --sub dev-user --role USER --ttl 1h)"
        ]
      }
    }
    const admin = yield* signToken({ sub: "dev-admin", role: "SUPER_ADMIN", expiresInSeconds: 12 * 3600 }, secret.secret)
    const user = yield* signToken({ sub: "dev-user", role: "USER", expiresInSeconds: 12 * 3600 }, secret.secret)
    return {
      bearer: user,
      lines: [
        `  USER token (dev-user):          ${user}`,
        `  SUPER_ADMIN token (dev-admin):  ${admin}`,
        "  Tokens are signed with a secret generated for this run."
      ]
    }
  })

/** What a newcomer needs to try the embedded engine, printed once it is up. */
const embeddedBanner = (options: { readonly port: number; readonly secret: BannerSecret; readonly provider: string }) =>
  Layer.effectDiscard(
    Effect.gen(function* () {
      const tokens = yield* tokenLines(options.secret)
      const base = `http://localhost:${options.port}`
      yield* Console.log(
        [
          "",
          "AI Job Engine — embedded mode (in-memory storage and queues; nothing is kept after exit)",
          `  AI provider:  ${options.provider}`,
          `  API:          ${base}`,
          `  API docs:     ${base}/docs`,
          ...tokens.lines,
          "",
          "Create a flashcard job:",
          `  curl -s -X POST ${base}/api/ai/flashcard-generations -H 'Authorization: Bearer ${tokens.bearer}' -H 'Content-Type: application/json' -d '${sampleFlashcardRequest}'`,
          "Then follow it (use the jobId from the answer):",
          `  curl -s ${base}/api/ai/jobs/JOB_ID -H 'Authorization: Bearer ${tokens.bearer}'`,
          `  curl -s ${base}/api/ai/jobs/JOB_ID/artifacts -H 'Authorization: Bearer ${tokens.bearer}'`,
          ""
        ].join("\n")
      )
    })
  )

const embedded = Effect.gen(function* () {
  const http = yield* HttpConfig.config
  const provider = yield* ProviderConfig.config
  const transport = yield* httpTransportConfig
  const generated = Redacted.make(randomBytes(32).toString("base64url"))
  const secret = Option.getOrElse(http.authJwtSecret, () => generated)
  const bannerSecret: BannerSecret = Option.isSome(http.authJwtSecret)
    ? { _tag: "Configured" }
    : { _tag: "GeneratedForThisRun", secret: generated }
  const realProvider = Option.isSome(provider.apiKey)
  // Without a provider key the embedded engine runs the synthetic provider, which needs none;
  // the placeholder only lets the platform-key credential resolve.
  const synthetic = ConfigProvider.fromMap(
    new Map([["AI_GATEWAY", "synthetic"], ["AI_API_KEY", "embedded-synthetic-provider-needs-no-key"]])
  )
  const services = EngineServicesLive.pipe(
    Layer.provideMerge(MemoryInfrastructure),
    Layer.provideMerge(Layer.merge(ConfigLive, NodeContext.layer)),
    realProvider ? (layer) => layer : Layer.provide(Layer.setConfigProvider(synthetic.pipe(ConfigProvider.orElse(() => ConfigProvider.fromEnv()))))
  )
  return Layer.merge(
    engineParts(http.port),
    embeddedBanner({ port: http.port, secret: bannerSecret, provider: realProvider ? provider.baseUrl : "synthetic (set AI_API_KEY for a real one)" })
  ).pipe(
    Layer.provide(Layer.merge(ApiSettings.make({ jwtSecret: Redacted.value(secret), transport }), ReadinessProbeMemory)),
    Layer.provide(services)
  )
})

const onMysqlAndRedis = Effect.gen(function* () {
  const http = yield* HttpConfig.config
  const migrate = yield* migrateOnStartConfig
  const migrations = migrate
    ? Layer.effectDiscard(
      runMigrations.pipe(
        Effect.tap((applied) =>
          Effect.logInfo("migrations applied on start").pipe(Effect.annotateLogs({ applied: applied.length }))
        )
      )
    ).pipe(Layer.provide(Layer.merge(MysqlFromConfig, NodeContext.layer)), Layer.provide(StorageConfig.layer))
    : Layer.empty
  const services = EngineServicesLive.pipe(
    Layer.provideMerge(LiveInfrastructure),
    Layer.provideMerge(Layer.merge(ConfigLive, NodeContext.layer)),
    Layer.provide(migrations)
  )
  return engineParts(http.port).pipe(
    Layer.provide(Layer.merge(ApiSettings.layer, ReadinessProbeLive)),
    Layer.provide(services)
  )
})

const AllInOne = Layer.unwrapEffect(
  Effect.gen(function* () {
    const storage = yield* StorageConfig.config
    const database = Option.isSome(storage.databaseUrl)
    const redis = Option.isSome(storage.redisUrl)
    if (!database && !redis) return yield* embedded
    if (database && redis) return yield* onMysqlAndRedis
    return yield* Effect.fail(
      new Error(`${database ? "REDIS_URL" : "DATABASE_URL"} is not set: set both DATABASE_URL and REDIS_URL, or neither (embedded)`)
    )
  })
)

runProcess("ai-job-engine", AllInOne)
