import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from "node:crypto"
import { Clock, Effect, Either, Redacted, Schema } from "effect"
import { SignJWT } from "jose"

/**
 * Bearer tokens of the HTTP API: HS256 JWTs signed with `AUTH_JWT_SECRET`, carrying `sub` (the
 * user id), `role` and `exp`. Verification and minting both take time from Effect's Clock, so a
 * TestClock decides what "expired" means. The all-in-one program mints development tokens with
 * `signToken`. Verification is a synchronous HMAC with `node:crypto` (jose's `jwtVerify` cost
 * about 40 times as much per request); minting stays with jose.
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

/** The HMAC key of a secret, imported once per secret rather than on every request. */
const importedKeys = new WeakMap<Redacted.Redacted<string>, KeyObject>()
const keyOf = (secret: Redacted.Redacted<string>): KeyObject => {
  const cached = importedKeys.get(secret)
  if (cached !== undefined) return cached
  const key = createSecretKey(Buffer.from(Redacted.value(secret), "utf8"))
  importedKeys.set(secret, key)
  return key
}

const base64urlSegment = /^[A-Za-z0-9_-]*={0,2}$/
const strictUtf8 = new TextDecoder("utf-8", { fatal: true })

/** A base64url segment's bytes, refused where jose's decoder (`atob` on Node 20) refuses it. */
const bytesOf = (segment: string): Buffer | undefined => {
  if (!base64urlSegment.test(segment)) return undefined
  const unpadded = segment.replace(/=+$/, "")
  if (unpadded.length % 4 === 1 || (unpadded.length !== segment.length && segment.length % 4 !== 0)) return undefined
  return Buffer.from(unpadded, "base64url")
}

/** A base64url segment decoded to a JSON object, or undefined (bad encoding, bad UTF-8, not JSON, not an object). */
const jsonObjectOf = (segment: string): Record<string, unknown> | undefined => {
  const bytes = bytesOf(segment)
  if (bytes === undefined) return undefined
  try {
    const parsed: unknown = JSON.parse(strictUtf8.decode(bytes))
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
      ? parsed as Record<string, unknown>
      : undefined
  } catch {
    return undefined
  }
}

/**
 * `crit` as jose accepts it with no extensions configured: absent, or `["b64"]` with `b64: true`
 * (a JWT never carries an unencoded payload).
 */
const critAccepted = (header: Record<string, unknown>): boolean =>
  header.crit === undefined ||
  (Array.isArray(header.crit) && header.crit.length === 1 && header.crit[0] === "b64" && header.b64 === true)

const numericClaim = (claims: Record<string, unknown>, name: string): "absent" | "invalid" | number => {
  if (!Object.hasOwn(claims, name)) return "absent"
  const value = claims[name]
  return typeof value === "number" ? value : "invalid"
}

/**
 * The checks jose's `jwtVerify` makes with `algorithms: ["HS256"]` and `requiredClaims: ["sub",
 * "exp"]`: three segments, a JSON-object header with `alg` exactly HS256, the HMAC-SHA256
 * signature compared in constant time, a JSON-object claims set, `sub` and `exp` present, `iat`,
 * `nbf` and `exp` numbers when present, `nbf` not after now and `exp` after now (whole seconds).
 */
export const verifyHs256 = (
  token: string,
  key: KeyObject,
  nowMillis: number
): Either.Either<Record<string, unknown>, string> => {
  const segments = token.split(".")
  if (segments.length !== 3) return Either.left("malformed")
  const [encodedHeader, encodedClaims, encodedSignature] = segments as [string, string, string]
  const header = jsonObjectOf(encodedHeader)
  if (header === undefined || !critAccepted(header)) return Either.left("malformed")
  if (typeof header.alg !== "string" || header.alg.length === 0) return Either.left("malformed")
  if (header.alg !== algorithm) return Either.left("algorithm not allowed")
  const signature = bytesOf(encodedSignature)
  if (signature === undefined) return Either.left("malformed")
  const expected = createHmac("sha256", key).update(`${encodedHeader}.${encodedClaims}`).digest()
  if (signature.length !== expected.length || !timingSafeEqual(signature, expected)) return Either.left("bad signature")
  const claims = jsonObjectOf(encodedClaims)
  if (claims === undefined) return Either.left("malformed")
  for (const required of ["sub", "exp"]) {
    if (!Object.hasOwn(claims, required)) return Either.left(`claim ${required} invalid`)
  }
  const now = Math.floor(nowMillis / 1000)
  const iat = numericClaim(claims, "iat")
  if (iat === "invalid") return Either.left("claim iat invalid")
  const nbf = numericClaim(claims, "nbf")
  if (nbf === "invalid" || (typeof nbf === "number" && nbf > now)) return Either.left("claim nbf invalid")
  const exp = numericClaim(claims, "exp")
  if (exp === "invalid") return Either.left("claim exp invalid")
  if (typeof exp === "number" && exp <= now) return Either.left("expired")
  return Either.right(claims)
}

const decodeClaims = Schema.decodeUnknownEither(TokenClaims)

/**
 * Verifies signature (HS256 only: `alg: none` and every other algorithm are refused), `exp`
 * (required, against the Clock) and the claims' shape.
 */
export const verifyToken = (
  token: string,
  secret: Redacted.Redacted<string>
): Effect.Effect<AuthenticatedUser, InvalidToken> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    if (token.length === 0) return new InvalidToken({ reason: "empty" })
    const verified = verifyHs256(token, keyOf(secret), now)
    if (Either.isLeft(verified)) return new InvalidToken({ reason: verified.left })
    const claims = decodeClaims(verified.right)
    return Either.isLeft(claims)
      ? new InvalidToken({ reason: "claims do not match (sub, role, exp)" })
      : Effect.succeed<AuthenticatedUser>({ userId: claims.right.sub, role: claims.right.role })
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
