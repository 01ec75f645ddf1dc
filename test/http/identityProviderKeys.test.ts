import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either, Layer, Option, TestClock } from "effect"
import { AuthSettings } from "../../src/config/AuthSettings.js"
import { TokenVerifier } from "../../src/http/TokenVerifier.js"
import { makeSigningKey, signWith, startIdentityProvider } from "../support/identityProvider.js"
import { LogCapture, LogCaptureLayer } from "../support/logCapture.js"

/**
 * The identity provider's keys as the API fetches them (docs/architecture.md §15.8): a real
 * provider on 127.0.0.1 serves discovery and the key set and counts what it serves; the
 * TestClock decides how much time passed.
 */

const audience = "ai-job-engine"
const rsa = makeSigningKey("RS256", "rsa-1")
const ec = makeSigningKey("ES256", "ec-1")
const rotated = makeSigningKey("EdDSA", "ed-2")

/** Claims valid for an hour of TestClock time (which starts at 0). */
const claimsOf = (issuer: string) => ({ iss: issuer, aud: audience, sub: "learner-1", exp: 3600 })

const setup = (
  options: {
    readonly cacheControl?: string
    readonly discoveryIssuer?: (issuer: string) => string
    readonly direct?: boolean
  } = {}
) =>
  Effect.gen(function*() {
    const idp = yield* startIdentityProvider([rsa, ec], options)
    const settings = AuthSettings.make({
      jwtSecret: "a-secret-of-thirty-two-bytes-abc",
      identityProvider: {
        issuer: idp.issuer,
        audiences: [audience],
        jwksUrl: options.direct === true ? Option.some(idp.jwksUrl) : Option.none(),
        jwks: { maxAge: Duration.seconds(600), cooldown: Duration.seconds(30) }
      }
    })
    const context = yield* Layer.build(TokenVerifier.Default.pipe(Layer.provide(settings)))
    const verifier = yield* Effect.provide(TokenVerifier, context)
    const keys = Option.getOrThrow(verifier.identityProviderKeys)
    const accepts = (token: string) => Effect.map(Effect.either(verifier.verify(token)), Either.isRight)
    return { idp, verifier, keys, accepts, claims: claimsOf(idp.issuer) }
  })

describe("the identity provider's keys", () => {
  it.scoped("are fetched on the first provider token, not before, and then once for many tokens", () =>
    Effect.gen(function*() {
      const { accepts, claims, idp } = yield* setup()
      expect(idp.served()).toEqual({ discovery: 0, jwks: 0 })
      const hs256 = yield* Effect.promise(async () => {
        const { SignJWT } = await import("jose")
        return new SignJWT({ role: "USER" }).setProtectedHeader({ alg: "HS256" }).setSubject("u").setExpirationTime(
          3600
        )
          .sign(new TextEncoder().encode("a-secret-of-thirty-two-bytes-abc"))
      })
      expect(yield* accepts(hs256)).toBe(true)
      expect(idp.served()).toEqual({ discovery: 0, jwks: 0 })

      const rsaToken = yield* signWith(rsa, claims)
      const ecToken = yield* signWith(ec, claims)
      for (let i = 0; i < 50; i++) {
        expect(yield* accepts(i % 2 === 0 ? rsaToken : ecToken)).toBe(true)
      }
      expect(idp.served()).toEqual({ discovery: 1, jwks: 1 })
    }))

  it.scoped("a provider token seen again is held to the clock as on first sight: accepted until exp plus the skew, then expired for good", () =>
    Effect.gen(function*() {
      const { claims, verifier } = yield* setup()
      const reasonOf = (token: string) =>
        Effect.map(
          Effect.either(verifier.verify(token)),
          Either.match({ onLeft: (error) => error.reason, onRight: (user) => `accepted ${user.userId}` })
        )
      const token = yield* signWith(rsa, claims)
      expect(yield* reasonOf(token)).toBe("accepted learner-1")
      // exp is 3600 s of TestClock time; the default clock skew is 30 s.
      yield* TestClock.adjust("3629 seconds")
      expect(yield* reasonOf(token)).toBe("accepted learner-1")
      yield* TestClock.adjust("1 second")
      expect(yield* reasonOf(token)).toBe("expired")
      expect(yield* reasonOf(token)).toBe("expired")
      // One signed for another audience is refused however often the first was accepted.
      expect(yield* reasonOf(yield* signWith(rsa, { ...claims, aud: "another-api", exp: 7200 }))).toBe(
        "claim aud invalid"
      )
    }))

  it.scoped("AUTH_JWKS_URL is used as given, without discovery", () =>
    Effect.gen(function*() {
      const { accepts, claims, idp } = yield* setup({ direct: true })
      expect(yield* accepts(yield* signWith(rsa, claims))).toBe(true)
      expect(idp.served()).toEqual({ discovery: 0, jwks: 1 })
    }))

  it.scoped("Cache-Control max-age is honoured, within the cooldown and AUTH_JWKS_MAX_AGE_S", () =>
    Effect.gen(function*() {
      const { accepts, claims, idp, keys } = yield* setup({ cacheControl: "public, max-age=120" })
      const token = yield* signWith(rsa, claims)
      expect(yield* accepts(token)).toBe(true)
      yield* TestClock.adjust("119 seconds")
      expect(yield* accepts(token)).toBe(true)
      expect(idp.served().jwks).toBe(1)
      // Stale: the token is checked with the keys held while they are fetched again.
      yield* TestClock.adjust("2 seconds")
      expect(yield* accepts(token)).toBe(true)
      yield* keys.settled
      expect(idp.served().jwks).toBe(2)

      // A max-age longer than AUTH_JWKS_MAX_AGE_S (600 s) is cut to it.
      idp.setCacheControl("max-age=86400")
      yield* TestClock.adjust("121 seconds")
      yield* accepts(token)
      yield* keys.settled
      expect(idp.served().jwks).toBe(3)
      yield* TestClock.adjust("599 seconds")
      yield* accepts(token)
      expect(idp.served().jwks).toBe(3)
      yield* TestClock.adjust("2 seconds")
      yield* accepts(token)
      yield* keys.settled
      expect(idp.served().jwks).toBe(4)

      // no-store: fetched again no sooner than the cooldown (30 s).
      idp.setCacheControl("no-store")
      yield* TestClock.adjust("601 seconds")
      yield* accepts(token)
      yield* keys.settled
      expect(idp.served().jwks).toBe(5)
      yield* TestClock.adjust("29 seconds")
      yield* accepts(token)
      expect(idp.served().jwks).toBe(5)
      yield* TestClock.adjust("2 seconds")
      yield* accepts(token)
      yield* keys.settled
      expect(idp.served().jwks).toBe(6)
    }))

  it.scoped("a new kid is picked up by one refetch; forged kids refetch at most once per cooldown", () =>
    Effect.gen(function*() {
      const { accepts, claims, idp } = yield* setup()
      expect(yield* accepts(yield* signWith(rsa, claims))).toBe(true)
      expect(idp.served().jwks).toBe(1)
      yield* TestClock.adjust("31 seconds")

      idp.publish([rsa, ec, rotated])
      expect(yield* accepts(yield* signWith(rotated, claims))).toBe(true)
      expect(idp.served().jwks).toBe(2)

      const forged = makeSigningKey("RS256", "forged")
      for (let i = 0; i < 20; i++) {
        expect(yield* accepts(yield* signWith(forged, claims, { kid: `forged-${i}` }))).toBe(false)
      }
      expect(idp.served().jwks).toBe(2)
      yield* TestClock.adjust("31 seconds")
      for (let i = 0; i < 20; i++) {
        expect(yield* accepts(yield* signWith(forged, claims, { kid: `forged-again-${i}` }))).toBe(false)
      }
      expect(idp.served().jwks).toBe(3)
      expect(idp.served().discovery).toBe(1)
    }))

  it.scoped("keys already fetched keep working while the provider fails or is gone; a removed key stops once the set is fetched again", () =>
    Effect.gen(function*() {
      const { accepts, claims, idp, keys } = yield* setup()
      const rsaToken = yield* signWith(rsa, claims)
      expect(yield* accepts(rsaToken)).toBe(true)

      idp.setMode("failing")
      for (let round = 0; round < 3; round++) {
        yield* TestClock.adjust("601 seconds")
        expect(yield* accepts(rsaToken)).toBe(true)
        yield* keys.settled
        expect(yield* accepts(yield* signWith(ec, claims))).toBe(true)
      }
      const lines = yield* Effect.flatMap(LogCapture, (capture) => capture.lines)
      expect(lines.filter((line) => line.includes("identity provider keys could not be fetched")).length).toBe(3)
      expect(lines.some((line) => line.includes("keysKept=2") && line.includes("HTTP 503"))).toBe(true)

      idp.setMode("up")
      idp.publish([ec])
      yield* TestClock.adjust("601 seconds")
      expect(yield* accepts(rsaToken)).toBe(true)
      yield* keys.settled
      expect(yield* accepts(rsaToken)).toBe(false)
      expect(yield* accepts(yield* signWith(ec, claims))).toBe(true)

      yield* idp.shutDown
      yield* TestClock.adjust("601 seconds")
      expect(yield* accepts(yield* signWith(ec, claims))).toBe(true)
      yield* keys.settled
      expect(yield* accepts(yield* signWith(ec, claims))).toBe(true)
    }).pipe(Effect.provide(LogCaptureLayer)))

  it.scoped("a discovery document that names another issuer is not trusted: no key is fetched", () =>
    Effect.gen(function*() {
      const { accepts, claims, idp } = yield* setup({ discoveryIssuer: () => "https://attacker.example" })
      expect(yield* accepts(yield* signWith(rsa, claims))).toBe(false)
      expect(idp.served()).toEqual({ discovery: 1, jwks: 0 })
      const lines = yield* Effect.flatMap(LogCapture, (capture) => capture.lines)
      expect(lines.some((line) => line.includes("the discovery document names another issuer"))).toBe(true)
    }).pipe(Effect.provide(LogCaptureLayer)))
})
