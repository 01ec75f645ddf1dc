/**
 * `npm run start:api`: the HTTP API (ADR 7) as its own process, on `PORT` (default 3000),
 * against MySQL (`DATABASE_URL`) and Redis (`REDIS_URL`). Bearer tokens are verified with
 * `AUTH_JWT_SECRET` (required); `RUNTIME_SERVICE_TOKEN` opens the internal credential route;
 * `AI_PLATFORM_ENABLED=false` refuses new AI work with 503. `/openapi.json` and `/docs`
 * describe the API; `/healthz` and `/readyz` are for the orchestrator.
 *
 * Jobs it accepts are written with their outbox event in one transaction; the dispatcher
 * (`npm run start:dispatcher`) and the workers run them. On SIGTERM or SIGINT it stops
 * accepting connections, lets requests in flight finish, closes its pools and exits 0.
 */
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Cause, ConfigError, Console, Data, Effect, Layer, Option } from "effect"
import { ApiSettings } from "../http/ApiSettings.js"
import { ReadinessProbeLive } from "../http/ReadinessProbe.js"
import { nodeApiServer } from "../http/server.js"
import { ConfigLive, EngineServicesLive, LiveInfrastructure } from "../layers/AppLayers.js"
import { HttpConfig, StorageConfig } from "../layers/config.js"

class StorageMissing extends Data.TaggedError("StorageMissing")<{ readonly variables: ReadonlyArray<string> }> {
  override get message() {
    return `${this.variables.join(" and ")} must be set: the API stores jobs in MySQL and checks Redis`
  }
}

/** Fails with one readable line before any connection is attempted. */
const requireStorage = Layer.effectDiscard(
  Effect.gen(function* () {
    const storage = yield* StorageConfig
    const missing = [
      ...(Option.isNone(storage.databaseUrl) ? ["DATABASE_URL"] : []),
      ...(Option.isNone(storage.redisUrl) ? ["REDIS_URL"] : [])
    ]
    if (missing.length > 0) return yield* Effect.fail(new StorageMissing({ variables: missing }))
  })
)

const Config = Layer.merge(ConfigLive, NodeContext.layer)

/** The engine's services over MySQL + Redis (one pool, one Redis connection set, shared). */
const Services = EngineServicesLive.pipe(
  Layer.provideMerge(LiveInfrastructure),
  Layer.provide(requireStorage),
  Layer.provideMerge(Config)
)

const Server = Layer.unwrapEffect(
  Effect.map(HttpConfig, (http) => nodeApiServer({ port: http.port, logRequests: true }))
).pipe(Layer.provide(HttpConfig.layer))

const ApiProcess = Server.pipe(
  Layer.provide(Layer.merge(ReadinessProbeLive, ApiSettings.layer)),
  Layer.provide(Services)
)

const reportFailure = <E>(cause: Cause.Cause<E>) =>
  Cause.isInterruptedOnly(cause)
    ? Effect.void
    : Console.error(
      Option.match(Cause.failureOption(cause), {
        onNone: () => Cause.pretty(cause),
        onSome: (error) =>
          ConfigError.isConfigError(error)
            ? `api: ${String(error)}`
            : error instanceof Error
            ? `api: ${error.message}`
            : `api: ${String(error)}`
      })
    )

Layer.launch(ApiProcess).pipe(
  Effect.tapErrorCause(reportFailure),
  (program) => NodeRuntime.runMain(program, { disableErrorReporting: true })
)
