import { HttpApiBuilder, HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer, Option, Redacted } from "effect"
import { createServer } from "node:http"
import { TelemetrySettings } from "../config/TelemetrySettings.js"
import { constantTimeEquals } from "./Auth.js"
import type { InvalidToken, SignedInUser } from "./AuthTokens.js"
import { prometheusContentType, prometheusText } from "./prometheusText.js"
import { TokenVerifier } from "./TokenVerifier.js"

/**
 * `GET /metrics`: the process's Effect metrics as Prometheus text. On the API's port it answers
 * `Authorization: Bearer <METRICS_TOKEN>` or a SUPER_ADMIN token; on a worker's or dispatcher's
 * `METRICS_PORT` listener it is open unless `METRICS_TOKEN` is set (that port belongs on a
 * private network). `refresh` samples the gauges read at scrape time (the outbox backlog).
 */

const bearerOf = (request: HttpServerRequest.HttpServerRequest): Option.Option<string> => {
  const match = /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i.exec((request.headers["authorization"] ?? "").trim())
  return match === null ? Option.none() : Option.some(match[1] ?? "")
}

interface MetricsAccess {
  readonly metricsToken: Option.Option<Redacted.Redacted<string>>
  /** On the API: the process's token check, for SUPER_ADMIN tokens (HS256 or the identity provider's). */
  readonly verifyUserToken: Option.Option<(token: string) => Effect.Effect<SignedInUser, InvalidToken>>
}

/** Who may read: the metrics token, or (on the API) a SUPER_ADMIN token; nobody needs to when neither exists. */
const allowed = (request: HttpServerRequest.HttpServerRequest, access: MetricsAccess) =>
  Effect.gen(function*() {
    if (Option.isNone(access.metricsToken) && Option.isNone(access.verifyUserToken)) return true
    const token = bearerOf(request)
    if (Option.isNone(token)) return false
    if (Option.isSome(access.metricsToken) && constantTimeEquals(access.metricsToken.value, token.value)) return true
    if (Option.isNone(access.verifyUserToken)) return false
    const user = yield* Effect.option(access.verifyUserToken.value(token.value))
    return Option.isSome(user) && user.value.role === "SUPER_ADMIN"
  })

const metricsHandler = (refresh: Effect.Effect<void>, access: MetricsAccess) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (!(yield* allowed(request, access))) {
      return HttpServerResponse.text("metrics need a bearer token\n", { status: 401 }).pipe(
        HttpServerResponse.setHeader("www-authenticate", "Bearer realm=\"metrics\"")
      )
    }
    yield* refresh
    const body = yield* prometheusText
    return HttpServerResponse.text(body, { contentType: prometheusContentType })
  })

/** Samples before a scrape; a failure is logged and the scrape answers with the last values. */
const guarded = <E, R>(refresh: Effect.Effect<void, E, R> | undefined) =>
  (refresh ?? Effect.void).pipe(Effect.catchAllCause((cause) => Effect.logWarning("metrics refresh failed", cause)))

/** `GET /metrics` beside the HttpApi's routes (API and all-in-one, on `PORT`). */
export const MetricsRoute = <E = never, R = never>(refresh?: Effect.Effect<void, E, R>) =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function*() {
      const context = yield* Effect.context<R>()
      const telemetry = yield* TelemetrySettings
      const verifier = yield* TokenVerifier
      yield* router.get(
        "/metrics",
        metricsHandler(Effect.provide(guarded(refresh), context), {
          metricsToken: telemetry.metricsToken,
          verifyUserToken: Option.some(verifier.verify)
        })
      )
    })
  ).pipe(Layer.provide(TokenVerifier.Default))

/**
 * Workers and dispatchers: a listener on `METRICS_PORT` with `/metrics` and `/healthz` (no
 * listener when the variable is unset). It serves nothing else and reads no request body.
 */
export const MetricsListener = <E = never, R = never>(refresh?: Effect.Effect<void, E, R>) =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const telemetry = yield* TelemetrySettings
      if (Option.isNone(telemetry.metricsPort)) return Layer.empty
      const context = yield* Effect.context<R>()
      const router = HttpRouter.empty.pipe(
        HttpRouter.get(
          "/metrics",
          metricsHandler(Effect.provide(guarded(refresh), context), {
            metricsToken: telemetry.metricsToken,
            verifyUserToken: Option.none()
          })
        ),
        HttpRouter.get("/healthz", HttpServerResponse.unsafeJson({ status: "ok" }))
      )
      return HttpServer.serve(router).pipe(
        HttpServer.withLogAddress,
        Layer.provide(NodeHttpServer.layer(() => createServer(), { port: telemetry.metricsPort.value }))
      )
    })
  )
