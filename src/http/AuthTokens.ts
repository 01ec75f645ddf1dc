import { createSecretKey, type KeyObject } from "node:crypto"
import { Clock, Effect, Redacted, Schema } from "effect"
import { errors as joseErrors, jwtVerify, SignJWT } from "jose"

/**
 * Bearer tokens of the HTTP API: HS256 JWTs signed with `AUTH_JWT_SECRET`, carrying `sub` (the
 * user id), `role` and `exp`. Verification and minting both take time from Effect's Clock, so a
 * TestClock decides what "expired" means. The all-in-one program mints development tokens with
 * `signToken`.
 */

export const Role = Schema.Literal("USER", "SUPER_ADMIN")
export type Role = typeof Role.Type

/**
 * A user id as a token may carry it: 1 to 64 of `A-Z a-z 0-9 . _ : @ -`. No spaces, no control
 * characters: a user id is compared byte for byte everywhere (MySQL included), so "a" and "a "
 * are never one user, and a newline cannot forge a log line.
 */
export const userIdPattern = /^[A-Za-z0-9._:@-]{1,64}$/

export const UserId = Schema.String.pipe(
  Schema.pattern(userIdPattern, { message: () => "sub: 1 to 64 of A-Z a-z 0-9 . _ : @ -" })
)

/** The claims the API relies on; anything else in the token is ignored. */
export const TokenClaims = Schema.Struct({
  sub: UserId,
  role: Role,
  exp: Schema.Number
})
export type TokenClaims = typeof TokenClaims.Type

export interface AuthenticatedUser {
  readonly userId: string
  readonly role: Role
}

/** Why a token was refused: for debug logs only (never the token itself); the caller sees one 401. */
export class InvalidToken extends Schema.TaggedError<InvalidToken>()("InvalidToken", {
  reason: Schema.String
}) {}

const algorithm = "HS256"

/**
 * The HMAC key of a secret, imported once: jose would otherwise import the raw bytes on every
 * request, which dominated the cost of an authenticated read.
 */
const importedKeys = new WeakMap<Redacted.Redacted<string>, KeyObject>()
const keyOf = (secret: Redacted.Redacted<string>): KeyObject => {
  const cached = importedKeys.get(secret)
  if (cached !== undefined) return cached
  const key = createSecretKey(Buffer.from(Redacted.value(secret), "utf8"))
  importedKeys.set(secret, key)
  return key
}

const reasonOf = (error: unknown): string => {
  if (error instanceof joseErrors.JWTExpired) return "expired"
  if (error instanceof joseErrors.JWTClaimValidationFailed) return `claim ${error.claim} invalid`
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return "bad signature"
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return "algorithm not allowed"
  if (error instanceof joseErrors.JOSEError) return error.code
  return "malformed"
}

const decodeClaims = Schema.decodeUnknown(TokenClaims)

/**
 * Verifies signature (HS256 only: `alg: none` and every other algorithm are refused), `exp`
 * (required, against the Clock) and the claims' shape.
 */
export const verifyToken = (
  token: string,
  secret: Redacted.Redacted<string>
): Effect.Effect<AuthenticatedUser, InvalidToken> =>
  Effect.gen(function* () {
    if (token.length === 0) return yield* new InvalidToken({ reason: "empty" })
    const now = yield* Clock.currentTimeMillis
    const verified = yield* Effect.tryPromise({
      try: () =>
        jwtVerify(token, keyOf(secret), {
          algorithms: [algorithm],
          requiredClaims: ["sub", "exp"],
          currentDate: new Date(now)
        }),
      catch: (error) => new InvalidToken({ reason: reasonOf(error) })
    })
    const claims = yield* decodeClaims(verified.payload).pipe(
      Effect.mapError(() => new InvalidToken({ reason: "claims do not match (sub, role, exp)" }))
    )
    return { userId: claims.sub, role: claims.role }
  })

/** Mints a token, e.g. for development or tests. `expiresInSeconds` defaults to one hour. */
export const signToken = (
  claims: { readonly sub: string; readonly role: Role; readonly expiresInSeconds?: number | undefined },
  secret: Redacted.Redacted<string>
): Effect.Effect<string> =>
  Effect.gen(function* () {
    const nowSeconds = Math.floor((yield* Clock.currentTimeMillis) / 1000)
    return yield* Effect.promise(() =>
      new SignJWT({ role: claims.role })
        .setProtectedHeader({ alg: algorithm, typ: "JWT" })
        .setSubject(claims.sub)
        .setIssuedAt(nowSeconds)
        .setExpirationTime(nowSeconds + (claims.expiresInSeconds ?? 3600))
        .sign(keyOf(secret))
    )
  })
