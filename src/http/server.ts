import { createServer } from "node:http"
import { HttpApiBuilder, HttpApiSwagger, HttpApp, HttpMiddleware, HttpServer, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { AiJobApi } from "./Api.js"
import { AuthLive } from "./Auth.js"
import { ErrorMiddlewareLive } from "./errorMapping.js"
import { AdminHandlersLive } from "./handlers/adminHandlers.js"
import { CredentialsHandlersLive } from "./handlers/credentialsHandlers.js"
import { HealthHandlersLive } from "./handlers/healthHandlers.js"
import { InternalHandlersLive } from "./handlers/internalHandlers.js"
import { JobsHandlersLive } from "./handlers/jobsHandlers.js"
import { PlatformGateLive } from "./PlatformGate.js"

/**
 * The HTTP API as layers. `ApiLive` needs the engine's services (AiJobService,
 * AiJobLifecycleRepository, ArtifactRepository, JobDefinitionRegistry, ResultProjectors,
 * CancelSignal, CredentialVault, OutboxAdmin, WorkerDirectory), a `ReadinessProbe` and
 * `ApiSettings`; `apiServer` adds `/openapi.json`, `/docs` and the error middleware and serves
 * it on whatever `HttpServer` it is given.
 */

export const ApiLive = HttpApiBuilder.api(AiJobApi).pipe(
  Layer.provide(Layer.mergeAll(JobsHandlersLive, CredentialsHandlersLive, AdminHandlersLive, InternalHandlersLive, HealthHandlersLive)),
  Layer.provide(Layer.merge(AuthLive, PlatformGateLive))
)

/** RFC 6750: a 401 names the scheme the client should use (set just before the response is sent). */
const bearerChallenge = HttpMiddleware.make((app) =>
  Effect.zipRight(
    HttpApp.appendPreResponseHandler((_request, response) =>
      Effect.succeed(
        response.status === 401
          ? HttpServerResponse.setHeader(response, "www-authenticate", 'Bearer realm="ai-job-engine"')
          : response
      )
    ),
    app
  )
)

export const apiServer = (options: { readonly logRequests?: boolean } = {}) =>
  HttpApiBuilder.serve((app) => (options.logRequests === true ? HttpMiddleware.logger(bearerChallenge(app)) : bearerChallenge(app))).pipe(
    Layer.provide(HttpApiSwagger.layer({ path: "/docs" })),
    Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" })),
    Layer.provide(ErrorMiddlewareLive),
    Layer.provide(ApiLive)
  )

/** The API on a Node HTTP server at `port` (0: any free port), logging its address. */
export const nodeApiServer = (options: { readonly port: number; readonly host?: string; readonly logRequests?: boolean }) =>
  apiServer(options).pipe(
    HttpServer.withLogAddress,
    Layer.provide(NodeHttpServer.layer(createServer, { port: options.port, host: options.host }))
  )
