/**
 * `npm run start:api`: the HTTP API (docs/architecture.md §15) as its own process, on `PORT`
 * (default 3000), against MySQL (`DATABASE_URL`) and Redis (`REDIS_URL`). Bearer tokens are
 * verified with `AUTH_JWT_SECRET` (HS256) or the keys of the identity provider at `AUTH_ISSUER`
 * (one of them required, both allowed); `RUNTIME_SERVICE_TOKEN` opens the internal
 * credential route; `AI_PLATFORM_ENABLED=false` refuses new AI work with 503. `/openapi.json`
 * and `/docs` describe the API; `/healthz` and `/readyz` are for the orchestrator.
 *
 * Jobs it accepts are written with their outbox event in one transaction; the dispatcher
 * (`npm run start:dispatcher`) and the workers run them. On SIGTERM or SIGINT it stops
 * accepting connections, lets requests in flight finish, closes its pools and exits 0.
 */
import { Layer } from "effect"
import { sampleProviderBreakers } from "../services/ProviderCircuitBreaker.js"
import { ApiPart, LiveApiSupport, LiveStack } from "./AppLayers.js"
import { requireStorage, runProcess } from "./runProcess.js"

runProcess(
  "api",
  ApiPart({ logRequests: true, sampleMetrics: sampleProviderBreakers }).pipe(
    Layer.provide(LiveApiSupport),
    Layer.provide(LiveStack),
    Layer.provide(requireStorage("the API"))
  )
)
