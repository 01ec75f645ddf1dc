import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either, Redacted } from "effect"
import { createLocalJWKSet, type JSONWebKeySet, jwtVerify } from "jose"
import { createHmac, createSecretKey, sign } from "node:crypto"
import {
  asymmetricAlgorithms,
  identityProviderDefaults,
  type IdentityProviderSettings
} from "../../src/config/AuthSettings.js"
import { hs256KeyOf } from "../../src/http/AuthTokens.js"
import { claimPath, identityTokenPolicy } from "../../src/http/identityTokens.js"
import { keySetOf } from "../../src/http/jwks.js"
import { verifyBearer } from "../../src/http/TokenVerifier.js"
import { makeSigningKey, type SigningKey, signWith } from "../support/identityProvider.js"

/**
 * Provider tokens are verified with node:crypto, and must be accepted exactly when jose's
 * `jwtVerify` accepts them with the same key set and options (issuer, audience, algorithms,
 * clock tolerance, sub and exp required), token by token; HS256 tokens exactly when jose accepts
 * them with the secret. The cases where the engine is stricter than jose are listed apart.
 */

const now = Date.UTC(2026, 11, 1, 12, 0, 0)
const nowSeconds = Math.floor(now / 1000)
const issuer = "https://idp.example.test/realms/learning"
const audience = "ai-job-engine"
const secret = "a-secret-of-thirty-two-bytes-abc"

const rsa = makeSigningKey("RS256", "rsa-1")
const ec = makeSigningKey("ES256", "ec-1")
const ed = makeSigningKey("EdDSA", "ed-1")
const weakRsa = makeSigningKey("RS256", "rsa-weak", { rsaBits: 1024 })
const rsaForEncryption = makeSigningKey("RS256", "rsa-enc", { extra: { use: "enc" } })
const rsaOnlyRs512 = makeSigningKey("RS512", "rsa-512", { extra: { alg: "RS512" } })
const ec384 = makeSigningKey("ES384", "ec-384")
const unpublished = makeSigningKey("RS256", "rsa-unpublished")
const published: ReadonlyArray<SigningKey> = [rsa, ec, ed, weakRsa, rsaForEncryption, rsaOnlyRs512, ec384]
const jwks: JSONWebKeySet = { keys: published.map((key) => ({ ...key.jwk })) }

const settings: IdentityProviderSettings = {
  ...identityProviderDefaults,
  issuer,
  audiences: [audience],
  roleClaim: "realm_access.roles"
}

const good = {
  iss: issuer,
  aud: audience,
  sub: "learner-1",
  iat: nowSeconds,
  exp: nowSeconds + 300,
  realm_access: { roles: ["offline_access"] }
}

/** A JSON segment; a string is taken as the JSON text itself (`1e309` has no JSON.stringify form). */
const segment = (value: unknown) =>
  Buffer.from(typeof value === "string" ? value : JSON.stringify(value), "utf8").toString("base64url")
/** A token signed over exactly these header and claims with `signer` (base64url signature). */
const raw = (header: unknown, claims: unknown, signer: (signingInput: string) => Buffer) => {
  const signingInput = `${segment(header)}.${segment(claims)}`
  return `${signingInput}.${signer(signingInput).toString("base64url")}`
}
const hmacWith = (key: string) => (input: string) => createHmac("sha256", key).update(input).digest()
const signRs256 = (input: string) => sign("sha256", Buffer.from(input), rsa.privateKey)
const rsaPublicPem = rsa.publicKey.export({ format: "pem", type: "spki" }).toString()

const corpus = Effect.gen(function*() {
  const tampered = (yield* signWith(rsa, good)).split(".")
  const cases: ReadonlyArray<readonly [string, string]> = [
    ["good RS256", yield* signWith(rsa, good)],
    ["good ES256", yield* signWith(ec, good)],
    ["good EdDSA", yield* signWith(ed, good)],
    ["audience in an array", yield* signWith(rsa, { ...good, aud: ["account", audience] })],
    ["ES256 without kid (one key fits)", yield* signWith(ec, good, { kid: undefined })],
    ["RS256 without kid (two keys fit)", yield* signWith(rsa, good, { kid: undefined })],
    ["nbf within the clock skew", yield* signWith(rsa, { ...good, nbf: nowSeconds + 20 })],
    ["exp within the clock skew", yield* signWith(rsa, { ...good, exp: nowSeconds - 10 })],
    ["wrong issuer", yield* signWith(rsa, { ...good, iss: "https://idp.example.test/realms/other" })],
    ["no issuer", yield* signWith(rsa, { ...good, iss: undefined })],
    ["wrong audience", yield* signWith(rsa, { ...good, aud: "account" })],
    ["audience array without ours", yield* signWith(rsa, { ...good, aud: ["account", "other"] })],
    ["no audience", yield* signWith(rsa, { ...good, aud: undefined })],
    ["expired", yield* signWith(rsa, { ...good, exp: nowSeconds - 60 })],
    ["not yet valid", yield* signWith(rsa, { ...good, nbf: nowSeconds + 120 })],
    ["no exp", yield* signWith(rsa, { ...good, exp: undefined })],
    ["exp as a string", raw({ alg: "RS256", kid: "rsa-1" }, { ...good, exp: String(nowSeconds + 300) }, signRs256)],
    ["iat as a string", raw({ alg: "RS256", kid: "rsa-1" }, { ...good, iat: "now" }, signRs256)],
    ["no sub", yield* signWith(rsa, { ...good, sub: undefined })],
    ["unknown kid", yield* signWith(unpublished, good)],
    ["kid not a string", yield* signWith(rsa, good, { kid: 7 })],
    ["alg none", `${segment({ alg: "none", typ: "JWT" })}.${segment(good)}.`],
    ["HS256 with a guessed secret", raw({ alg: "HS256", typ: "JWT" }, good, hmacWith("secret"))],
    [
      "HS256 with the configured secret",
      raw({ alg: "HS256", typ: "JWT" }, { ...good, role: "USER" }, hmacWith(secret))
    ],
    [
      "HS256 signed with the RSA public key",
      raw({ alg: "HS256", typ: "JWT", kid: "rsa-1" }, good, hmacWith(rsaPublicPem))
    ],
    [
      "tampered payload",
      `${tampered[0]}.${segment({ ...good, sub: "admin-1", realm_access: { roles: ["SUPER_ADMIN"] } })}.${tampered[2]}`
    ],
    ["ES256 header on an RSA key", yield* signWith(ec, good, { kid: "rsa-1" })],
    ["RS256 header on an EC key", yield* signWith(rsa, good, { kid: "ec-1" })],
    ["EdDSA header on an RSA key", yield* signWith(ed, good, { kid: "rsa-1" })],
    ["RS512 (not allowed)", yield* signWith(rsaOnlyRs512, good)],
    ["RS512 on a key without alg (not allowed)", yield* signWith(rsa, good, { alg: "RS512" })],
    ["PS256 (not allowed)", yield* signWith(rsa, good, { alg: "PS256" })],
    ["ES384 (not allowed)", yield* signWith(ec384, good)],
    [
      "RS256 with a 1024-bit key",
      raw({ alg: "RS256", kid: "rsa-weak" }, good, (input) => sign("sha256", Buffer.from(input), weakRsa.privateKey))
    ],
    ["key published for encryption", yield* signWith(rsaForEncryption, good)],
    ["RS256 on a key published for RS512 only", yield* signWith(rsaOnlyRs512, good, { alg: "RS256" })],
    [
      "ES256 signature in DER",
      raw({ alg: "ES256", kid: "ec-1" }, good, (input) => sign("sha256", Buffer.from(input), ec.privateKey))
    ],
    ["EdDSA signature cut short", (yield* signWith(ed, good)).slice(0, -4)],
    ["signed by another key with a published kid", yield* signWith(unpublished, good, { kid: "rsa-1" })],
    ["claims not JSON", raw({ alg: "RS256", kid: "rsa-1" }, "{not json", signRs256)],
    ["claims an array", raw({ alg: "RS256", kid: "rsa-1" }, [good], signRs256)],
    ["garbage", "not-a-token"]
  ]
  return cases
})

/** Accepted by the engine while jose accepts them: the engine's own rules on top. */
const stricterThanJose = Effect.gen(function*() {
  const cases: ReadonlyArray<readonly [string, string]> = [
    [
      "exp 1e309 (Infinity)",
      raw(
        { alg: "RS256", kid: "rsa-1" },
        JSON.stringify({ ...good, exp: 0 }).replace("\"exp\":0", "\"exp\":1e309"),
        signRs256
      )
    ],
    ["exp two years ahead", yield* signWith(rsa, { ...good, exp: nowSeconds + 2 * 366 * 24 * 3600 })],
    ["a sub with a space", yield* signWith(rsa, { ...good, sub: "learner 1" })],
    ["a role claim that is a number", yield* signWith(rsa, { ...good, realm_access: { roles: 3 } })]
  ]
  return cases
})

const policy = identityTokenPolicy(settings)
const keys = keySetOf({ keys: jwks.keys.map((key) => ({ ...key })) })
const oracleKeys = createLocalJWKSet(jwks)
const secretKey = createSecretKey(Buffer.from(secret, "utf8"))

const contexts = [
  { name: "secret and provider", withSecret: true },
  { name: "provider only", withSecret: false }
] as const

const engineAccepts = (token: string, withSecret: boolean) =>
  Either.isRight(verifyBearer(token, {
    hs256Key: withSecret ? hs256KeyOf(Redacted.make(secret)) : undefined,
    identityProvider: { policy, keys },
    nowMillis: now
  }))

const joseAccepts = async (token: string, withSecret: boolean) => {
  const currentDate = new Date(now)
  const requiredClaims = ["sub", "exp"]
  const provider = await jwtVerify(token, oracleKeys, {
    issuer,
    audience,
    algorithms: [...settings.algorithms],
    clockTolerance: Duration.toSeconds(settings.clockSkew),
    requiredClaims,
    currentDate
  }).then(() => true, () => false)
  if (provider || !withSecret) return provider
  return jwtVerify(token, secretKey, { algorithms: ["HS256"], requiredClaims, currentDate }).then(
    () => true,
    () => false
  )
}

describe.each(contexts)("provider tokens held to jose's jwtVerify ($name)", ({ withSecret }) => {
  it.effect("every token of the matrix gets jose's answer", () =>
    Effect.gen(function*() {
      const disagreements: Array<string> = []
      let accepted = 0
      for (const [name, token] of yield* corpus) {
        const oracle = yield* Effect.promise(() => joseAccepts(token, withSecret))
        if (oracle) accepted += 1
        if (engineAccepts(token, withSecret) !== oracle) {
          disagreements.push(`${name}: jose ${oracle ? "accepts" : "refuses"}`)
        }
      }
      expect(disagreements).toEqual([])
      // Both outcomes occur, so the comparison can fail either way.
      expect(accepted).toBe(withSecret ? 8 : 7)
    }))

  it.effect("the engine refuses what jose accepts only by its own rules (exp ceiling, the sub rule, the role claim)", () =>
    Effect.gen(function*() {
      for (const [name, token] of yield* stricterThanJose) {
        expect(yield* Effect.promise(() => joseAccepts(token, withSecret)), name).toBe(true)
        expect(engineAccepts(token, withSecret), name).toBe(false)
      }
    }))
})

describe("every supported algorithm, when allowed", () => {
  it.effect("RS, PS and ES of each size and EdDSA verify with node:crypto as with jose", () =>
    Effect.gen(function*() {
      const all = asymmetricAlgorithms.map((alg) => makeSigningKey(alg, `key-${alg}`))
      const allKeys = { keys: all.map((key) => ({ ...key.jwk })) }
      const allPolicy = identityTokenPolicy({ ...settings, algorithms: asymmetricAlgorithms })
      for (const key of all) {
        const token = yield* signWith(key, good)
        const oracle = yield* Effect.promise(() =>
          jwtVerify(token, createLocalJWKSet(allKeys), {
            issuer,
            audience,
            algorithms: [...asymmetricAlgorithms],
            requiredClaims: ["sub", "exp"],
            currentDate: new Date(now)
          }).then(() => true, () => false)
        )
        expect(oracle, key.alg).toBe(true)
        const verified = verifyBearer(token, {
          hs256Key: undefined,
          identityProvider: { policy: allPolicy, keys: keySetOf(allKeys) },
          nowMillis: now
        })
        expect(Either.getOrUndefined(verified), key.alg).toEqual({
          userId: "learner-1",
          role: "USER",
          expiresAtMillis: (nowSeconds + 300) * 1000
        })
      }
    }))
})

describe("the caller a provider token names", () => {
  it.effect("roles come from the configured claim: a dotted path, a name with dots, a string or an array", () =>
    Effect.gen(function*() {
      const admin = { ...good, realm_access: { roles: ["offline_access", "SUPER_ADMIN"] } }
      const roleOf = (token: string, overrides: Partial<IdentityProviderSettings>) =>
        Either.map(
          verifyBearer(token, {
            hs256Key: undefined,
            identityProvider: { policy: identityTokenPolicy({ ...settings, ...overrides }), keys },
            nowMillis: now
          }),
          (user) => user.role
        )
      expect(roleOf(yield* signWith(rsa, admin), {})).toEqual(Either.right("SUPER_ADMIN"))
      expect(roleOf(yield* signWith(rsa, good), {})).toEqual(Either.right("USER"))
      expect(roleOf(yield* signWith(rsa, { ...good, realm_access: undefined }), {})).toEqual(Either.right("USER"))
      const namespaced = yield* signWith(rsa, { ...good, "https://example.com/roles": ["ops"] })
      expect(roleOf(namespaced, { roleClaim: "https://example.com/roles", adminRole: "ops" })).toEqual(
        Either.right("SUPER_ADMIN")
      )
      const groups = yield* signWith(rsa, { ...good, "cognito:groups": "admins" })
      expect(roleOf(groups, { roleClaim: "cognito:groups", adminRole: "admins" })).toEqual(Either.right("SUPER_ADMIN"))
      const flat = yield* signWith(rsa, { ...good, role: "SUPER_ADMIN" })
      expect(roleOf(flat, { roleClaim: "role" })).toEqual(Either.right("SUPER_ADMIN"))
    }))

  it("a claim path takes the longest member name at each level", () => {
    const claims = { resource_access: { "learning.app": { roles: ["a"] } }, "a.b": 1, a: { b: 2 } }
    expect(claimPath("resource_access.learning.app.roles")(claims)).toEqual(["a"])
    expect(claimPath("a.b")(claims)).toBe(1)
    expect(claimPath("resource_access.missing.roles")(claims)).toBeUndefined()
    expect(claimPath("a.b.c")(claims)).toBeUndefined()
  })

  it.effect("the subject and the audience can come from other claims (Cognito: client_id)", () =>
    Effect.gen(function*() {
      const cognito = identityTokenPolicy({ ...settings, audienceClaim: "client_id", subjectClaim: "username" })
      const access = yield* signWith(rsa, { ...good, aud: undefined, client_id: audience, username: "learner-7" })
      const idToken = yield* signWith(rsa, { ...good, username: "learner-7" })
      const check = (token: string) =>
        verifyBearer(token, { hs256Key: undefined, identityProvider: { policy: cognito, keys }, nowMillis: now })
      expect(Either.getOrUndefined(check(access))?.userId).toBe("learner-7")
      expect(Either.isLeft(check(idToken))).toBe(true)
    }))
})
