import {
  HttpApiBuilder,
  HttpApiSwagger,
  HttpApp,
  HttpMiddleware,
  HttpRouter,
  HttpServer,
  HttpServerResponse
} from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { createServer } from "node:http"
import { ApiSettings } from "../config/ApiSettings.js"
import { nodeServerOptions } from "../config/HttpTransportSettings.js"
import { AiJobApi } from "./Api.js"
import { AuthLive } from "./Auth.js"
import { consoleLayer } from "./console.js"
import { ErrorMiddlewareLive } from "./errorMapping.js"
import { AdminHandlersLive } from "./handlers/adminHandlers.js"
import { CredentialsHandlersLive } from "./handlers/credentialsHandlers.js"
import { HealthHandlersLive } from "./handlers/healthHandlers.js"
import { InternalHandlersLive } from "./handlers/internalHandlers.js"
import { JobsHandlersLive } from "./handlers/jobsHandlers.js"
import { httpMetrics } from "./httpMetrics.js"
import { MetricsRoute } from "./metricsEndpoint.js"
import { PlatformGateLive } from "./PlatformGate.js"
import { lingerWhenBodyUnread, requestBodyGuard } from "./requestBody.js"
import { requestSpan } from "./requestSpan.js"
import { corsLayer, securityHeaders } from "./responseHeaders.js"
import { TokenVerifier } from "./TokenVerifier.js"
import { routerConfig, UnroutedAnswersLive } from "./unroutedRequests.js"

/**
 * The HTTP API as layers: `ApiLive` needs the engine's services, a `ReadinessProbe` and
 * `ApiSettings`; `apiServer` adds `/openapi.json`, `/docs` and the error middleware and serves it
 * on whatever `HttpServer` it is given.
 */

export const ApiLive = HttpApiBuilder.api(AiJobApi).pipe(
  Layer.provide(
    Layer.mergeAll(
      JobsHandlersLive,
      CredentialsHandlersLive,
      AdminHandlersLive,
      InternalHandlersLive,
      HealthHandlersLive
    )
  ),
  Layer.provide(Layer.merge(AuthLive, PlatformGateLive))
)

/** RFC 6750: a 401 names the scheme the client should use (set just before the response is sent). */
const bearerChallenge = HttpMiddleware.make((app) =>
  Effect.zipRight(
    HttpApp.appendPreResponseHandler((_request, response) =>
      Effect.succeed(
        response.status === 401
          ? HttpServerResponse.setHeader(response, "www-authenticate", "Bearer realm=\"ai-job-engine\"")
          : response
      )
    ),
    app
  )
)

/**
 * Around every answer, outermost first: the request's span, the request metrics, protective
 * headers, the rest of a body left unread discarded (within bounds) or the connection closed,
 * the request log, the 401 challenge. Inside, before routing: CORS when origins are configured,
 * the body guard, the error mapping, the 404/405 of a request no route takes.
 */
export const apiServer = <E = never, R = never>(
  options: {
    readonly logRequests?: boolean
    /** Run before each `/metrics` answer: the gauges sampled at scrape time (the all-in-one's outbox). */
    readonly sampleMetrics?: Effect.Effect<void, E, R>
  } = {}
) =>
  Layer.unwrapEffect(
    Effect.map(ApiSettings, ({ transport }) => {
      const logged = <E, R>(
        app: HttpApp.Default<E, R>
      ) => (options.logRequests === true ? HttpMiddleware.logger(app) : app)
      return HttpApiBuilder.serve((app) =>
        requestSpan(httpMetrics(securityHeaders(lingerWhenBodyUnread(logged(bearerChallenge(app))))))
      ).pipe(
        // `requestSpan` makes each request's span (it decides whose trace context to continue).
        HttpMiddleware.withTracerDisabledWhen(() => true),
        Layer.provide(MetricsRoute(options.sampleMetrics)),
        Layer.provide(HttpApiSwagger.layer({ path: "/docs" })),
        Layer.provide(consoleLayer),
        Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" })),
        Layer.provide(ErrorMiddlewareLive),
        Layer.provide(UnroutedAnswersLive),
        Layer.provide(HttpApiBuilder.middleware(AiJobApi, requestBodyGuard(transport.maxBodyBytes))),
        Layer.provide(corsLayer(transport.corsAllowedOrigins)),
        Layer.provide(ApiLive),
        Layer.provide(HttpRouter.setRouterConfig(routerConfig)),
        // The one verifier of the process (the auth middlewares and `/metrics` share it too).
        Layer.provide(TokenVerifier.Default)
      )
    })
  )

/** A Node HTTP server with the configured request and header timeouts. */
export const nodeHttpServer = (options: { readonly port: number; readonly host?: string | undefined }) =>
  Layer.unwrapEffect(
    Effect.map(
      ApiSettings,
      ({ transport }) =>
        NodeHttpServer.layer(() => createServer(nodeServerOptions(transport)), {
          port: options.port,
          host: options.host
        })
    )
  )

/** The API on a Node HTTP server at `port` (0: any free port), logging its address. */
export const nodeApiServer = <E = never, R = never>(options: {
  readonly port: number
  readonly host?: string
  readonly logRequests?: boolean
  readonly sampleMetrics?: Effect.Effect<void, E, R>
}) => apiServer(options).pipe(HttpServer.withLogAddress, Layer.provide(nodeHttpServer(options)))
