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
import { NodeContext } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { ApiSettings } from "../config/ApiSettings.js"
import { ReadinessProbeLive } from "./AppLayers.js"
import { nodeApiServer } from "../http/server.js"
import { ConfigLive, EngineServicesLive, LiveInfrastructure } from "./AppLayers.js"
import { HttpConfig } from "../config/EngineConfig.js"
import { requireStorage, runProcess } from "./runProcess.js"

/** The engine's services over MySQL + Redis (one pool, one Redis connection set, shared). */
const Services = EngineServicesLive.pipe(
  Layer.provideMerge(LiveInfrastructure),
  Layer.provideMerge(Layer.merge(ConfigLive, NodeContext.layer)),
  Layer.provide(requireStorage("the API"))
)

const Server = Layer.unwrapEffect(
  Effect.map(HttpConfig, (http) => nodeApiServer({ port: http.port, logRequests: true }))
).pipe(Layer.provide(HttpConfig.layer))

runProcess(
  "api",
  Server.pipe(Layer.provide(Layer.merge(ReadinessProbeLive, ApiSettings.layer)), Layer.provide(Services))
)
