import { HttpApiMiddleware, HttpApiSecurity, HttpServerRequest, OpenApi } from "@effect/platform"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import { ApiSettings } from "../config/ApiSettings.js"
import { Forbidden, forbidden, Unauthorized, unauthorized } from "./ApiErrors.js"
import type { SignedInUser } from "./AuthTokens.js"
import { TokenVerifier } from "./TokenVerifier.js"

/** The caller of a user or admin route, as its verified token says (with the token's expiry). */
export class CurrentUser extends Context.Tag("ai-job-engine/http/CurrentUser")<CurrentUser, SignedInUser>() {}

const userBearer = HttpApiSecurity.bearer.pipe(
  HttpApiSecurity.annotate(
    OpenApi.Description,
    "A JWT: HS256 signed with AUTH_JWT_SECRET (claims sub, role USER | SUPER_ADMIN, exp), or an access token of the " +
      "identity provider at AUTH_ISSUER (RS256 / ES256 / EdDSA by default; iss, aud, exp checked; the role from " +
      "AUTH_ROLE_CLAIM). The user id (sub) is 1 to 64 of A-Z a-z 0-9 . _ : @ -."
  )
)

const runtimeBearer = HttpApiSecurity.bearer.pipe(
  HttpApiSecurity.annotate(
    OpenApi.Description,
    "The runtime service token (RUNTIME_SERVICE_TOKEN) of an external AI runtime."
  )
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
  Effect.logDebug("bearer token refused").pipe(
    Effect.annotateLogs({ reason }),
    Effect.zipRight(Effect.fail(unauthorized()))
  )

const authenticate = (verifier: TokenVerifier) =>
  Effect.gen(function*() {
    const token = yield* bearerToken
    if (Option.isNone(token)) return yield* refuse("no bearer token")
    return yield* verifier.verify(token.value).pipe(Effect.catchTag("InvalidToken", (error) => refuse(error.reason)))
  })

const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.map(TokenVerifier, (verifier) => Authentication.of({ bearer: () => authenticate(verifier) }))
)

const AdminAuthenticationLive = Layer.effect(
  AdminAuthentication,
  Effect.map(TokenVerifier, (verifier) =>
    AdminAuthentication.of({
      bearer: () =>
        Effect.flatMap(authenticate(verifier), (user) =>
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

const RuntimeServiceAuthenticationLive = Layer.effect(
  RuntimeServiceAuthentication,
  Effect.map(ApiSettings, (settings) =>
    RuntimeServiceAuthentication.of({
      runtimeServiceToken: () =>
        Effect.gen(function*() {
          const token = yield* bearerToken
          if (Option.isNone(token)) return yield* refuse("no runtime service token")
          const expected = settings.runtimeServiceToken
          if (Option.isNone(expected)) return yield* refuse("RUNTIME_SERVICE_TOKEN is not configured")
          if (!constantTimeEquals(expected.value, token.value)) return yield* refuse("wrong runtime service token")
        })
    }))
)

/** The three middlewares; user tokens are checked by the process's one `TokenVerifier` (shared with `/metrics`). */
export const AuthLive = Layer.mergeAll(AuthenticationLive, AdminAuthenticationLive, RuntimeServiceAuthenticationLive)
  .pipe(
    Layer.provide(TokenVerifier.Default)
  )
