import { createHash, timingSafeEqual } from "node:crypto"
import { HttpApiMiddleware, HttpApiSecurity, HttpServerRequest, OpenApi } from "@effect/platform"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { Forbidden, forbidden, Unauthorized, unauthorized } from "./ApiErrors.js"
import { ApiSettings } from "../config/ApiSettings.js"
import { type AuthenticatedUser, verifyToken } from "./AuthTokens.js"

/** The caller of a user or admin route, as its verified token says. */
export class CurrentUser extends Context.Tag("ai-job-engine/http/CurrentUser")<CurrentUser, AuthenticatedUser>() {}

const userBearer = HttpApiSecurity.bearer.pipe(
  HttpApiSecurity.annotate(OpenApi.Description, "HS256 JWT signed with AUTH_JWT_SECRET; claims sub (the user id: 1 to 64 of A-Z a-z 0-9 . _ : @ -), role (USER | SUPER_ADMIN), exp.")
)

const runtimeBearer = HttpApiSecurity.bearer.pipe(
  HttpApiSecurity.annotate(OpenApi.Description, "The runtime service token (RUNTIME_SERVICE_TOKEN) of an external AI runtime.")
)

/** Any valid user token (USER or SUPER_ADMIN). */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("ai-job-engine/http/Authentication", {
  failure: Unauthorized,
  provides: CurrentUser,
  security: { bearer: userBearer }
}) {}

/** A valid token whose role is SUPER_ADMIN: 401 without a valid token, 403 for another role. */
export class AdminAuthentication extends HttpApiMiddleware.Tag<AdminAuthentication>()(
  "ai-job-engine/http/AdminAuthentication",
  {
    failure: Schema.Union(Unauthorized, Forbidden),
    provides: CurrentUser,
    security: { bearer: userBearer }
  }
) {}

/** The internal routes: `Authorization: Bearer <RUNTIME_SERVICE_TOKEN>`. */
export class RuntimeServiceAuthentication extends HttpApiMiddleware.Tag<RuntimeServiceAuthentication>()(
  "ai-job-engine/http/RuntimeServiceAuthentication",
  {
    failure: Unauthorized,
    security: { runtimeServiceToken: runtimeBearer }
  }
) {}

/**
 * The token of `Authorization: Bearer <token>`, strictly: HttpApiSecurity.bearer only cuts off
 * the first seven characters, so a missing header becomes an empty token and `Basic ...` a
 * garbled one. Here anything but the Bearer scheme with one non-empty token is none.
 */
const bearerToken = Effect.map(HttpServerRequest.HttpServerRequest, (request): Option.Option<string> => {
  const header = request.headers["authorization"]
  if (header === undefined) return Option.none()
  const match = /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i.exec(header.trim())
  return match === null ? Option.none() : Option.some(match[1] ?? "")
})

const refuse = (reason: string) =>
  Effect.logDebug("bearer token refused").pipe(Effect.annotateLogs({ reason }), Effect.zipRight(Effect.fail(unauthorized())))

const authenticate = (secret: Redacted.Redacted<string>) =>
  Effect.gen(function* () {
    const token = yield* bearerToken
    if (Option.isNone(token)) return yield* refuse("no bearer token")
    return yield* verifyToken(token.value, secret).pipe(Effect.catchTag("InvalidToken", (error) => refuse(error.reason)))
  })

export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.map(ApiSettings, (settings) => Authentication.of({ bearer: () => authenticate(settings.jwtSecret) }))
)

export const AdminAuthenticationLive = Layer.effect(
  AdminAuthentication,
  Effect.map(ApiSettings, (settings) =>
    AdminAuthentication.of({
      bearer: () =>
        Effect.flatMap(authenticate(settings.jwtSecret), (user) =>
          user.role === "SUPER_ADMIN"
            ? Effect.succeed(user)
            : Effect.logDebug("admin route refused").pipe(
              Effect.annotateLogs({ userId: user.userId, role: user.role }),
              Effect.zipRight(Effect.fail(forbidden()))
            ))
    }))
)

const digest = (value: string) => createHash("sha256").update(value, "utf8").digest()

/** Compares digests (always 32 bytes) with `timingSafeEqual`, so neither content nor length leaks. */
export const constantTimeEquals = (a: Redacted.Redacted<string>, b: string): boolean =>
  timingSafeEqual(digest(Redacted.value(a)), digest(b))

export const RuntimeServiceAuthenticationLive = Layer.effect(
  RuntimeServiceAuthentication,
  Effect.map(ApiSettings, (settings) =>
    RuntimeServiceAuthentication.of({
      runtimeServiceToken: () =>
        Effect.gen(function* () {
          const token = yield* bearerToken
          if (Option.isNone(token)) return yield* refuse("no runtime service token")
          const expected = settings.runtimeServiceToken
          if (Option.isNone(expected)) return yield* refuse("RUNTIME_SERVICE_TOKEN is not configured")
          if (!constantTimeEquals(expected.value, token.value)) return yield* refuse("wrong runtime service token")
        })
    }))
)

export const AuthLive = Layer.mergeAll(AuthenticationLive, AdminAuthenticationLive, RuntimeServiceAuthenticationLive)
