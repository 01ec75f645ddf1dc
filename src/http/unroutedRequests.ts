import {
  HttpApiBuilder,
  type HttpRouter,
  HttpServerError,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { Cause, Effect, Layer, Option } from "effect"
import * as FindMyWay from "find-my-way-ts"
import { MethodNotAllowed, publicMessages, RouteNotFound } from "./ApiErrors.js"

/**
 * A request no route takes gets `404 ROUTE_NOT_FOUND`, or `405 METHOD_NOT_ALLOWED` with `Allow`
 * when the path exists under other methods (the router alone answers an empty 404 to both). The
 * methods come from a matcher built like the router's, so the two never disagree.
 */

/**
 * The router's matching rules, for the server and the 405 check alike. find-my-way's default
 * parameter limit of 100 characters made a job id of nine emoji (108 percent-encoded) match no
 * route; a long one now reaches its route and the schema's 400.
 */
export const routerConfig = { maxParamLength: 16_384 } as const

const candidateMethods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const

/** Built once per router (the routes are fixed once the server runs). */
const matchers = new WeakMap<HttpRouter.HttpRouter<unknown, unknown>, FindMyWay.Router<true>>()

const matcherOf = (router: HttpRouter.HttpRouter<unknown, unknown>): FindMyWay.Router<true> => {
  const known = matchers.get(router)
  if (known !== undefined) return known
  const matcher = FindMyWay.make<true>(routerConfig)
  for (const route of router.routes) {
    if (route.method === "*") matcher.all(route.path, true)
    else matcher.on(route.method, route.path, true)
  }
  matchers.set(router, matcher)
  return matcher
}

/** The methods the router would take at `url`, in a stable order. */
export const allowedMethods = (router: HttpRouter.HttpRouter<unknown, unknown>, url: string): ReadonlyArray<string> => {
  const matcher = matcherOf(router)
  const allowed = candidateMethods.filter((method) => matcher.find(method, url) !== undefined)
  return allowed.includes("GET") && !allowed.includes("HEAD") ? [...allowed, "HEAD"] : allowed
}

const routeNotFound = HttpServerResponse.schemaJson(RouteNotFound)
const methodNotAllowed = HttpServerResponse.schemaJson(MethodNotAllowed)

const notFound = Effect.orDie(
  routeNotFound(new RouteNotFound({ message: publicMessages.routeNotFound }), { status: 404 })
)

const isRouteNotFound = (error: unknown): error is HttpServerError.RouteNotFound =>
  error instanceof HttpServerError.RouteNotFound

const answer = (unrouted: HttpServerError.RouteNotFound) =>
  Effect.gen(function*() {
    const router = yield* HttpApiBuilder.Router.router
    const allowed = allowedMethods(router, unrouted.request.url)
    if (allowed.length === 0) return yield* notFound
    return yield* Effect.orDie(methodNotAllowed(new MethodNotAllowed({ message: publicMessages.methodNotAllowed }), {
      status: 405,
      headers: { allow: allowed.join(", ") }
    }))
  })

/**
 * An empty segment (`/api/ai/jobs//cancel`) names no route: the router would read
 * `GET /api/ai/jobs//cancel` as the job `cancel`, where OpenAPI's `{jobId}` never matches nothing.
 */
const hasEmptySegment = (url: string) => (url.split("?")[0] ?? "").includes("//")

/**
 * API middleware (around the router, before the server turns failures into answers): the
 * router's `RouteNotFound` becomes 404 or 405 (with `Allow`). The router's failures are not in
 * the app's type, so the cause is inspected.
 */
export const UnroutedAnswersLive = HttpApiBuilder.middleware(
  (app) =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      hasEmptySegment(request.url)
        ? notFound
        : Effect.catchAllCause(app, (cause) =>
          Option.match(Option.filter(Cause.failureOption(cause), isRouteNotFound), {
            onNone: () => Effect.failCause(cause),
            onSome: answer
          }))),
  { withContext: true }
  // The router the API serves from: `Router.Live` is one layer, built once per server.
).pipe(Layer.provide(HttpApiBuilder.Router.Live))
