import { Duration, Either } from "effect"
import type { AsymmetricAlgorithm, IdentityProviderSettings } from "../config/AuthSettings.js"
import type { Role, SignedInUser, VerifiedToken } from "./AuthTokens.js"
import { userIdPattern } from "./AuthTokens.js"
import { type KeySet, selectKey, signatureValid } from "./jwks.js"
import { checkTimeClaims, type CompactJws, jsonObjectOf, signatureOf } from "./jwtCompact.js"

/**
 * Tokens of an OpenID Connect identity provider (docs/architecture.md §15.8): signed with one of
 * its published keys under an allowed asymmetric `alg`, issued by it (`iss`), for this API (the
 * audience), within their times (give or take the clock skew); the user id and the role come from
 * the claims the settings name. Pure: the key set is given.
 */

/** Why a provider token was refused; `UnknownKid` may mean the provider rotated its keys since the last fetch. */
export type IdentityTokenRefusal = { readonly _tag: "UnknownKid" } | {
  readonly _tag: "Refused"
  readonly reason: string
}

const refused = (reason: string): Either.Either<never, IdentityTokenRefusal> => Either.left({ _tag: "Refused", reason })

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * A claim read by a dotted path: `role`, `realm_access.roles`, `cognito:groups`, and names that
 * contain dots themselves (`https://example.com/roles`, Keycloak client ids): at each level the
 * longest run of segments that is a member wins.
 */
export const claimPath = (path: string) => {
  const segments = path.split(".")
  return (claims: Readonly<Record<string, unknown>>): unknown => {
    let current: unknown = claims
    let from = 0
    while (from < segments.length) {
      if (!isRecord(current)) return undefined
      let next: number | undefined
      for (let to = segments.length; to > from && next === undefined; to--) {
        if (Object.hasOwn(current, segments.slice(from, to).join("."))) next = to
      }
      if (next === undefined) return undefined
      current = current[segments.slice(from, next).join(".")]
      from = next
    }
    return current
  }
}

/** The role claim's values: absent is no role, a string is one, an array of strings is several; anything else refuses the token. */
const rolesOf = (value: unknown): ReadonlyArray<string> | undefined => {
  if (value === undefined) return []
  if (typeof value === "string") return [value]
  return Array.isArray(value) && value.every((item) => typeof item === "string") ? value : undefined
}

/** jose's audience rule: a string that is one of ours, or an array that contains one of ours. */
const audienceMatches = (value: unknown, audiences: ReadonlyArray<string>): boolean =>
  typeof value === "string"
    ? audiences.includes(value)
    : Array.isArray(value) && audiences.some((audience) => value.includes(audience))

export interface IdentityTokenPolicy {
  readonly settings: IdentityProviderSettings
  readonly isAllowed: (alg: string) => alg is AsymmetricAlgorithm
  readonly subjectOf: (claims: Readonly<Record<string, unknown>>) => unknown
  readonly rolesOf: (claims: Readonly<Record<string, unknown>>) => unknown
  readonly audienceOf: (claims: Readonly<Record<string, unknown>>) => unknown
}

/** The settings made into checks once, not per request. */
export const identityTokenPolicy = (settings: IdentityProviderSettings): IdentityTokenPolicy => {
  const allowed = new Set<string>(settings.algorithms)
  return {
    settings,
    isAllowed: (alg): alg is AsymmetricAlgorithm => allowed.has(alg),
    subjectOf: claimPath(settings.subjectClaim),
    rolesOf: claimPath(settings.roleClaim),
    audienceOf: claimPath(settings.audienceClaim)
  }
}

/**
 * Verifies a provider token against `keys` at `nowMillis`. The signature is checked before the
 * claims are read, as jose does; `alg: none`, HS* and any algorithm off the list are refused
 * before a key is looked for.
 */
export const verifyIdentityToken = (
  jws: CompactJws,
  keys: KeySet,
  policy: IdentityTokenPolicy,
  nowMillis: number
): Either.Either<SignedInUser, IdentityTokenRefusal> =>
  Either.map(acceptedIdentityToken(jws, keys, policy, nowMillis), (accepted) => accepted.user)

/** `verifyIdentityToken`, keeping the verified claims (what a verifier remembers to check the times again). */
export const acceptedIdentityToken = (
  jws: CompactJws,
  keys: KeySet,
  policy: IdentityTokenPolicy,
  nowMillis: number
): Either.Either<VerifiedToken, IdentityTokenRefusal> => {
  const { settings } = policy
  if (!policy.isAllowed(jws.alg)) return refused("algorithm not allowed")
  const selection = selectKey(keys, jws.alg, jws.header.kid)
  if (selection._tag === "UnknownKid") return Either.left(selection)
  if (selection._tag === "Refused") return refused(selection.reason)
  const signature = signatureOf(jws)
  if (signature === undefined) return refused("malformed")
  if (!signatureValid(jws.alg, selection.key, jws.signingInput, signature)) return refused("bad signature")
  const claims = jsonObjectOf(jws.encodedClaims)
  if (claims === undefined) return refused("malformed")
  const expiresAtMillis = checkTimeClaims(claims, nowMillis, Duration.toSeconds(settings.clockSkew))
  if (Either.isLeft(expiresAtMillis)) return refused(expiresAtMillis.left)
  if (!Object.hasOwn(claims, "iss") || claims.iss !== settings.issuer) return refused("claim iss invalid")
  const audience = policy.audienceOf(claims)
  if (audience === undefined || !audienceMatches(audience, settings.audiences)) {
    return refused(`claim ${settings.audienceClaim} invalid`)
  }
  const userId = policy.subjectOf(claims)
  if (typeof userId !== "string" || !userIdPattern.test(userId)) {
    return refused(`claim ${settings.subjectClaim} invalid`)
  }
  const roles = rolesOf(policy.rolesOf(claims))
  if (roles === undefined) return refused(`claim ${settings.roleClaim} invalid`)
  const role: Role = roles.includes(settings.adminRole) ? "SUPER_ADMIN" : "USER"
  return Either.right({ user: { userId, role, expiresAtMillis: expiresAtMillis.right }, claims })
}
