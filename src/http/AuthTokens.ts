import { Clock, Effect, Either, Redacted, Schema } from "effect"
import { SignJWT } from "jose"
import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from "node:crypto"
import { checkTimeClaims, type CompactJws, jsonObjectOf, readCompactJws, signatureOf } from "./jwtCompact.js"

/**
 * HS256 bearer tokens signed with `AUTH_JWT_SECRET` (`sub`, `role`, `exp`), timed by Effect's Clock
 * so a TestClock decides what "expired" means. Verification is a synchronous HMAC with
 * `node:crypto` (jose's `jwtVerify` cost about 40 times as much per request); minting stays with jose.
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

/** A caller as a verified token shows it, with the token's `exp`: a live stream ends there. */
export interface SignedInUser extends AuthenticatedUser {
  readonly expiresAtMillis: number
}

/** Why a token was refused: for debug logs only (never the token itself); the caller sees one 401. */
export class InvalidToken extends Schema.TaggedError<InvalidToken>()("InvalidToken", {
  reason: Schema.String
}) {}

const algorithm = "HS256"

/** The HMAC key of a secret, imported once per secret rather than on every request. */
const importedKeys = new WeakMap<Redacted.Redacted<string>, KeyObject>()
export const hs256KeyOf = (secret: Redacted.Redacted<string>): KeyObject => {
  const cached = importedKeys.get(secret)
  if (cached !== undefined) return cached
  const key = createSecretKey(Buffer.from(Redacted.value(secret), "utf8"))
  importedKeys.set(secret, key)
  return key
}

const verifyHs256Jws = (
  jws: CompactJws,
  key: KeyObject,
  nowMillis: number
): Either.Either<Record<string, unknown>, string> => {
  if (jws.alg !== algorithm) return Either.left("algorithm not allowed")
  const signature = signatureOf(jws)
  if (signature === undefined) return Either.left("malformed")
  const expected = createHmac("sha256", key).update(jws.signingInput).digest()
  if (signature.length !== expected.length || !timingSafeEqual(signature, expected)) return Either.left("bad signature")
  const claims = jsonObjectOf(jws.encodedClaims)
  if (claims === undefined) return Either.left("malformed")
  return Either.map(checkTimeClaims(claims, nowMillis, 0), () => claims)
}

/**
 * The checks jose's `jwtVerify` makes with `algorithms: ["HS256"]` and `requiredClaims: ["sub",
 * "exp"]` (the signature compared in constant time), plus `exp` at most a year ahead.
 */
export const verifyHs256 = (
  token: string,
  key: KeyObject,
  nowMillis: number
): Either.Either<Record<string, unknown>, string> =>
  Either.flatMap(readCompactJws(token), (jws) => verifyHs256Jws(jws, key, nowMillis))

const decodeClaims = Schema.decodeUnknownEither(TokenClaims)

/** An accepted token (HS256 or a provider's): its caller, and the verified claims (whose time checks may be made again later). */
export interface VerifiedToken {
  readonly user: SignedInUser
  readonly claims: Record<string, unknown>
}

/** An HS256 token's caller with its verified claims, through the schema (`sub`, `role`, `exp`). */
export const acceptedHs256Token = (
  jws: CompactJws,
  key: KeyObject,
  nowMillis: number
): Either.Either<VerifiedToken, string> =>
  Either.flatMap(verifyHs256Jws(jws, key, nowMillis), (verified) => {
    const claims = decodeClaims(verified)
    return Either.isLeft(claims)
      ? Either.left("claims do not match (sub, role, exp)")
      : Either.right({
        user: { userId: claims.right.sub, role: claims.right.role, expiresAtMillis: claims.right.exp * 1000 },
        claims: verified
      })
  })

export const signedInUserOfHs256 = (
  jws: CompactJws,
  key: KeyObject,
  nowMillis: number
): Either.Either<SignedInUser, string> =>
  Either.map(acceptedHs256Token(jws, key, nowMillis), (accepted) => accepted.user)

/**
 * Verifies an HS256 token: signature (HS256 only: `alg: none` and every other algorithm are
 * refused), `exp` (required, against the Clock) and the claims' shape.
 */
export const verifyToken = (
  token: string,
  secret: Redacted.Redacted<string>
): Effect.Effect<AuthenticatedUser, InvalidToken> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    if (token.length === 0) return new InvalidToken({ reason: "empty" })
    const verified = Either.flatMap(readCompactJws(token), (jws) => signedInUserOfHs256(jws, hs256KeyOf(secret), now))
    return Either.isLeft(verified)
      ? new InvalidToken({ reason: verified.left })
      : Effect.succeed<AuthenticatedUser>({ userId: verified.right.userId, role: verified.right.role })
  })

/** Mints a token, e.g. for development or tests. `expiresInSeconds` defaults to one hour. */
export const signToken = (
  claims: { readonly sub: string; readonly role: Role; readonly expiresInSeconds?: number | undefined },
  secret: Redacted.Redacted<string>
): Effect.Effect<string> =>
  Effect.gen(function*() {
    const nowSeconds = Math.floor((yield* Clock.currentTimeMillis) / 1000)
    return yield* Effect.promise(() =>
      new SignJWT({ role: claims.role })
        .setProtectedHeader({ alg: algorithm, typ: "JWT" })
        .setSubject(claims.sub)
        .setIssuedAt(nowSeconds)
        .setExpirationTime(nowSeconds + (claims.expiresInSeconds ?? 3600))
        .sign(hs256KeyOf(secret))
    )
  })
