import { NodeHttpClient } from "@effect/platform-node"
import { Clock, Duration, Effect, Either, Option } from "effect"
import type { KeyObject } from "node:crypto"
import { AuthSettings } from "../config/AuthSettings.js"
import {
  acceptedHs256Token,
  hs256KeyOf,
  InvalidToken,
  type SignedInUser,
  signedInUserOfHs256,
  type VerifiedToken
} from "./AuthTokens.js"
import { type IdentityProviderKeys, makeIdentityProviderKeys } from "./IdentityProviderKeys.js"
import {
  acceptedIdentityToken,
  type IdentityTokenPolicy,
  identityTokenPolicy,
  type IdentityTokenRefusal,
  verifyIdentityToken
} from "./identityTokens.js"
import type { KeySet } from "./jwks.js"
import { checkTimeClaims, type CompactJws, readCompactJws } from "./jwtCompact.js"

/**
 * Every bearer token the API takes (routes, admin routes, live streams, `/metrics`) is checked
 * here: `alg: HS256` against `AUTH_JWT_SECRET` when it is set, an allowed asymmetric `alg`
 * against the identity provider's keys when `AUTH_ISSUER` is set, anything else refused.
 */

/** What a token is checked against at one instant. */
export interface VerificationContext {
  readonly hs256Key: KeyObject | undefined
  readonly identityProvider: { readonly policy: IdentityTokenPolicy; readonly keys: KeySet } | undefined
  readonly nowMillis: number
}

export type BearerRefusal = IdentityTokenRefusal

const refused = (reason: string): Either.Either<never, BearerRefusal> => Either.left({ _tag: "Refused", reason })

const verifyJws = (jws: CompactJws, context: VerificationContext): Either.Either<SignedInUser, BearerRefusal> => {
  if (jws.alg === "HS256") {
    if (context.hs256Key === undefined) return refused("HS256 tokens are not accepted: AUTH_JWT_SECRET is not set")
    return Either.mapLeft(
      signedInUserOfHs256(jws, context.hs256Key, context.nowMillis),
      (reason) => ({ _tag: "Refused", reason })
    )
  }
  if (context.identityProvider === undefined) return refused("algorithm not allowed")
  return verifyIdentityToken(jws, context.identityProvider.keys, context.identityProvider.policy, context.nowMillis)
}

/** Verifies a token synchronously (no fetch): the decision the service makes with the keys it holds. */
export const verifyBearer = (token: string, context: VerificationContext): Either.Either<SignedInUser, BearerRefusal> =>
  Either.flatMap(
    Either.mapLeft(readCompactJws(token), (reason) => ({ _tag: "Refused", reason } as const)),
    (jws) => verifyJws(jws, context)
  )

const invalid = (refusal: BearerRefusal) =>
  new InvalidToken({
    reason: refusal._tag === "UnknownKid" ? "no key of the identity provider has the token's kid" : refusal.reason
  })

/** How many accepted tokens a process remembers (a few hundred bytes each). */
const acceptedTokensCapacity = 4096

/**
 * A token this process accepted, and what it was checked against: nothing but the secret for
 * HS256 (which does not change while the process runs), the provider's key set for its tokens.
 */
interface AcceptedToken extends VerifiedToken {
  readonly keys: KeySet | undefined
  /** The clock skew its time claims are checked with, in seconds. */
  readonly toleranceSeconds: number
}

export class TokenVerifier extends Effect.Service<TokenVerifier>()("ai-job-engine/http/TokenVerifier", {
  scoped: Effect.gen(function*() {
    const settings = yield* AuthSettings
    const hs256Key = Option.getOrUndefined(Option.map(settings.jwtSecret, hs256KeyOf))
    const provider = yield* Effect.transposeMapOption(
      settings.identityProvider,
      (identityProvider) =>
        Effect.map(
          makeIdentityProviderKeys(identityProvider),
          (keys) => ({ keys, policy: identityTokenPolicy(identityProvider) })
        )
    )
    const providerKeys: Option.Option<IdentityProviderKeys> = Option.map(provider, ({ keys }) => keys)
    yield* Effect.logInfo("bearer tokens accepted").pipe(
      Effect.annotateLogs({
        hs256Secret: Option.isSome(settings.jwtSecret),
        identityProvider: Option.getOrElse(Option.map(settings.identityProvider, (idp) => idp.issuer), () => "none")
      })
    )

    // Tokens this process accepted: a token's signature and claims hold as long as what it was
    // checked against does (the secret; the provider's key set until it is fetched again), so one
    // seen again (every request of a client carries the same) is checked against the clock only,
    // with the refusals of a first sight. The oldest go first.
    const hs256Alone = hs256Key !== undefined && (Option.isNone(provider) || !provider.value.policy.isAllowed("HS256"))
    const providerSkewSeconds = Option.match(provider, {
      onNone: () => 0,
      onSome: ({ policy }) => Duration.toSeconds(policy.settings.clockSkew)
    })
    const acceptedTokens = new Map<string, AcceptedToken>()
    const remember = (token: string, accepted: AcceptedToken) => {
      if (acceptedTokens.size >= acceptedTokensCapacity) acceptedTokens.delete(acceptedTokens.keys().next().value ?? "")
      acceptedTokens.set(token, accepted)
    }
    const stillTimely = (token: string, seen: AcceptedToken, nowMillis: number) => {
      const timely = checkTimeClaims(seen.claims, nowMillis, seen.toleranceSeconds)
      if (Either.isRight(timely)) return Effect.succeed(seen.user)
      acceptedTokens.delete(token)
      return new InvalidToken({ reason: timely.left })
    }

    /** A token not accepted before (or whose key set was fetched again since): every check. */
    const verifyAfresh = (token: string, nowMillis: number): Effect.Effect<SignedInUser, InvalidToken> => {
      const jws = readCompactJws(token)
      if (Either.isLeft(jws)) return new InvalidToken({ reason: jws.left })
      if (hs256Alone && jws.right.alg === "HS256") {
        const accepted = acceptedHs256Token(jws.right, hs256Key, nowMillis)
        if (Either.isLeft(accepted)) return new InvalidToken({ reason: accepted.left })
        remember(token, { ...accepted.right, keys: undefined, toleranceSeconds: 0 })
        return Effect.succeed(accepted.right.user)
      }
      // Only a provider token with an allowed alg needs the key set (and may wait for its fetch).
      if (Option.isNone(provider) || !provider.value.policy.isAllowed(jws.right.alg)) {
        return Either.mapLeft(
          verifyJws(jws.right, { hs256Key, identityProvider: undefined, nowMillis }),
          invalid
        )
      }
      const { keys, policy } = provider.value
      const check = (current: KeySet) =>
        Either.map(acceptedIdentityToken(jws.right, current, policy, nowMillis), (accepted) => {
          remember(token, { ...accepted, keys: current, toleranceSeconds: providerSkewSeconds })
          return accepted.user
        })
      return Effect.flatMap(keys.current(nowMillis), (current) => {
        const first = check(current)
        return Either.isLeft(first) && first.left._tag === "UnknownKid"
          ? Effect.flatMap(keys.afterUnknownKid(nowMillis), (fetched) => Either.mapLeft(check(fetched), invalid))
          : Either.mapLeft(first, invalid)
      })
    }

    const verify = (token: string): Effect.Effect<SignedInUser, InvalidToken> =>
      Effect.flatMap(Clock.currentTimeMillis, (nowMillis) => {
        if (token.length === 0) return new InvalidToken({ reason: "empty" })
        const seen = acceptedTokens.get(token)
        if (seen === undefined) return verifyAfresh(token, nowMillis)
        if (seen.keys === undefined || Option.isNone(provider)) return stillTimely(token, seen, nowMillis)
        // A key set fetched since (a key rotated out, say) checks the token again in full.
        return Effect.flatMap(provider.value.keys.current(nowMillis), (current) => {
          if (current === seen.keys) return stillTimely(token, seen, nowMillis)
          acceptedTokens.delete(token)
          return verifyAfresh(token, nowMillis)
        })
      })

    return { verify, identityProviderKeys: providerKeys }
  }),
  dependencies: [NodeHttpClient.layerUndici]
}) {}
