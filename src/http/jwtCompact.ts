import { Either } from "effect"

/**
 * The parts of JWT verification every signing key shares: reading a compact JWS the way jose's
 * `jwtVerify` reads it (three base64url segments, a JSON-object header with a non-empty `alg`,
 * `crit` as jose accepts it with no extensions) and checking the claims' times. Synchronous and
 * allocation-light: the status read verifies a token on every request.
 */

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
export const jsonObjectOf = (segment: string): Record<string, unknown> | undefined => {
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

/** A compact JWS whose header was read; its signature is not checked yet. */
export interface CompactJws {
  readonly header: Record<string, unknown>
  readonly alg: string
  /** `{header}.{claims}` as sent: what the signature covers. */
  readonly signingInput: string
  readonly encodedClaims: string
  readonly encodedSignature: string
}

export const readCompactJws = (token: string): Either.Either<CompactJws, string> => {
  const segments = token.split(".")
  if (segments.length !== 3) return Either.left("malformed")
  const [encodedHeader, encodedClaims, encodedSignature] = segments as [string, string, string]
  const header = jsonObjectOf(encodedHeader)
  if (header === undefined || !critAccepted(header)) return Either.left("malformed")
  if (typeof header.alg !== "string" || header.alg.length === 0) return Either.left("malformed")
  return Either.right({
    header,
    alg: header.alg,
    signingInput: `${encodedHeader}.${encodedClaims}`,
    encodedClaims,
    encodedSignature
  })
}

/** The signature's bytes, or undefined when the segment is not base64url. */
export const signatureOf = (jws: CompactJws): Buffer | undefined => bytesOf(jws.encodedSignature)

const numericClaim = (claims: Record<string, unknown>, name: string): "absent" | "invalid" | number => {
  if (!Object.hasOwn(claims, name)) return "absent"
  const value = claims[name]
  return typeof value === "number" ? value : "invalid"
}

/**
 * The furthest `exp` accepted: a token that claims to be valid for more than a year (or forever:
 * `1e309` parses as Infinity) is refused, so no stream or session can be held on it indefinitely.
 */
export const maxTokenLifetimeSeconds = 365 * 24 * 3600

/**
 * The claims checks of jose's `jwtVerify` with `requiredClaims: ["sub", "exp"]` and
 * `clockTolerance` of `toleranceSeconds`: `sub` and `exp` present, `iat`, `nbf` and `exp`
 * numbers when present, `nbf` not after now and `exp` after now (whole seconds), plus the
 * ceiling on `exp` jose lacks. Returns `exp` in milliseconds.
 */
export const checkTimeClaims = (
  claims: Record<string, unknown>,
  nowMillis: number,
  toleranceSeconds: number
): Either.Either<number, string> => {
  for (const required of ["sub", "exp"]) {
    if (!Object.hasOwn(claims, required)) return Either.left(`claim ${required} invalid`)
  }
  const now = Math.floor(nowMillis / 1000)
  const iat = numericClaim(claims, "iat")
  if (iat === "invalid") return Either.left("claim iat invalid")
  const nbf = numericClaim(claims, "nbf")
  if (nbf === "invalid" || (typeof nbf === "number" && nbf > now + toleranceSeconds)) {
    return Either.left("claim nbf invalid")
  }
  const exp = numericClaim(claims, "exp")
  if (typeof exp !== "number") return Either.left("claim exp invalid")
  if (exp <= now - toleranceSeconds) return Either.left("expired")
  if (!(exp <= now + maxTokenLifetimeSeconds)) return Either.left("claim exp too far ahead")
  return Either.right(exp * 1000)
}
