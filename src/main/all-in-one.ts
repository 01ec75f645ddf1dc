/**
 * `npm start`: the whole engine in one process: HTTP API, outbox dispatcher, workers on both
 * queues, and the lock reaper.
 *
 * With `DATABASE_URL` and `REDIS_URL` unset it runs embedded: in-memory storage and queues, the
 * synthetic AI provider (the real one when `AI_API_KEY` is set), a JWT secret generated for the
 * run, and it prints ready-made tokens and a `curl` to try. With `AUTH_JWT_SECRET` set it uses
 * that secret and prints no token, only how to mint one (`npm run token`); with `AUTH_ISSUER`
 * alone, tokens come from that identity provider. With both storage URLs set it applies pending
 * migrations (`MIGRATE_ON_START`, default true) and runs on MySQL and Redis.
 */
import { Console, Effect, Layer, Option, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { ApiSettings } from "../config/ApiSettings.js"
import { AuthSettings } from "../config/AuthSettings.js"
import { HttpConfig, ProviderConfig } from "../config/EngineConfig.js"
import { signToken } from "../http/AuthTokens.js"
import { sampleOutboxBacklog } from "../services/EngineMetrics.js"
import { sampleProviderBreakers } from "../services/ProviderCircuitBreaker.js"
import {
  ApiPart,
  DispatcherPart,
  EmbeddedStack,
  LiveApiSupport,
  LiveStack,
  MigrationsOnStart,
  ReadinessProbeMemory,
  storageMode,
  WorkerPart
} from "./AppLayers.js"
import { runProcess } from "./runProcess.js"

// One process, one `/metrics` (on PORT): the dispatcher's outbox gauges are sampled per scrape.
const engineParts = Layer.mergeAll(
  ApiPart({ sampleMetrics: Effect.zipRight(sampleOutboxBacklog, sampleProviderBreakers) }),
  DispatcherPart,
  WorkerPart
)

const sampleFlashcardRequest = JSON.stringify({
  sourceText:
    "The mitochondrion is the powerhouse of the cell. It produces ATP through cellular respiration. Ribosomes build proteins.",
  count: 3
})

/** Where the tokens of the banner come from: a secret made for this run, the operator's, or the identity provider. */
type BannerSecret =
  | { readonly _tag: "GeneratedForThisRun"; readonly secret: Redacted.Redacted<string> }
  | { readonly _tag: "Configured" }
  | { readonly _tag: "IdentityProvider"; readonly issuer: string }

/** The lines that give a newcomer tokens: only a secret generated here may sign them in public. */
const tokenLines = (secret: BannerSecret) =>
  Effect.gen(function*() {
    if (secret._tag === "IdentityProvider") {
      return {
        bearer: "$TOKEN",
        lines: [
          `  Tokens come from the identity provider at ${secret.issuer} (AUTH_ISSUER): export TOKEN=<an access token it issued>`
        ]
      }
    }
    if (secret._tag === "Configured") {
      return {
        bearer: "$TOKEN",
        lines: [
          "  AUTH_JWT_SECRET is set: no token is printed (it would be valid wherever that secret is).",
          "  Mint one signed with it:  export TOKEN=$(npm run --silent token -- --sub dev-user --role USER --ttl 1h)"
        ]
      }
    }
    const admin = yield* signToken(
      { sub: "dev-admin", role: "SUPER_ADMIN", expiresInSeconds: 12 * 3600 },
      secret.secret
    )
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

/** Where a newcomer reaches the API: `localhost` unless `HOST` names one address. */
const bannerOrigin = (http: { readonly port: number; readonly host: Option.Option<string> }) => {
  const host = Option.getOrElse(Option.filter(http.host, (h) => h !== "0.0.0.0" && h !== "::"), () => "localhost")
  return `http://${host.includes(":") ? `[${host}]` : host}:${http.port}`
}

/** What a newcomer needs to try the embedded engine, printed once it is up. */
const embeddedBanner = (
  options: { readonly origin: string; readonly secret: BannerSecret; readonly provider: string }
) =>
  Layer.effectDiscard(
    Effect.gen(function*() {
      const tokens = yield* tokenLines(options.secret)
      const base = options.origin
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
          `  curl -s -X POST ${base}/api/ai/flashcard-generations -H "Authorization: Bearer ${tokens.bearer}" -H 'Content-Type: application/json' -d '${sampleFlashcardRequest}'`,
          "Then follow it (use the jobId from the answer):",
          `  curl -s ${base}/api/ai/jobs/JOB_ID -H "Authorization: Bearer ${tokens.bearer}"`,
          `  curl -s ${base}/api/ai/jobs/JOB_ID/artifacts -H "Authorization: Bearer ${tokens.bearer}"`,
          ""
        ].join("\n")
      )
    })
  )

const embedded = Effect.gen(function*() {
  const http = yield* HttpConfig.config
  const provider = yield* ProviderConfig.config
  const auth = yield* AuthSettings.config
  // Neither a secret nor an identity provider: a secret for this run, and tokens signed with it.
  const generated = Option.isNone(auth.jwtSecret) && Option.isNone(auth.identityProvider)
    ? Option.some(Redacted.make(randomBytes(32).toString("base64url")))
    : Option.none()
  const bannerSecret = ((): BannerSecret => {
    if (Option.isSome(generated)) return { _tag: "GeneratedForThisRun", secret: generated.value }
    if (Option.isSome(auth.jwtSecret) || Option.isNone(auth.identityProvider)) return { _tag: "Configured" }
    return { _tag: "IdentityProvider", issuer: auth.identityProvider.value.issuer }
  })()
  const realProvider = Option.isSome(provider.apiKey)
  return Layer.merge(
    engineParts,
    embeddedBanner({
      origin: bannerOrigin(http),
      secret: bannerSecret,
      provider: realProvider ? provider.baseUrl : "synthetic (set AI_API_KEY for a real one)"
    })
  ).pipe(
    // The API program's settings (RUNTIME_SERVICE_TOKEN, AI_PLATFORM_ENABLED, transport, live
    // streams), and its token settings with this run's secret when none is configured.
    Layer.provide(Layer.mergeAll(
      ApiSettings.layer,
      Layer.succeed(AuthSettings, { ...auth, jwtSecret: Option.orElse(auth.jwtSecret, () => generated) }),
      ReadinessProbeMemory
    )),
    Layer.provide(EmbeddedStack)
  )
})

const onMysqlAndRedis = engineParts.pipe(
  Layer.provide(LiveApiSupport),
  Layer.provide(LiveStack),
  Layer.provide(MigrationsOnStart)
)

const AllInOne = Layer.unwrapEffect(
  Effect.map(storageMode, (mode) => (mode === "embedded" ? Layer.unwrapEffect(embedded) : onMysqlAndRedis))
)

runProcess("ai-job-engine", AllInOne)
