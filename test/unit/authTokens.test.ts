import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Redacted } from "effect"
import { jwtVerify } from "jose"
import { createHmac, createSecretKey } from "node:crypto"
import { signToken, verifyHs256, verifyToken } from "../../src/http/AuthTokens.js"

/**
 * The node:crypto verifier must accept exactly what jose's `jwtVerify` (the verifier it
 * replaced) accepts under the API's options, token by token.
 */
const secret = "a-secret-of-thirty-two-bytes-abc"
const key = createSecretKey(Buffer.from(secret, "utf8"))
const now = Date.UTC(2026, 11, 1, 12, 0, 0)
const nowSeconds = Math.floor(now / 1000)

const segment = (value: unknown) =>
  Buffer.from(typeof value === "string" ? value : JSON.stringify(value), "utf8").toString("base64url")
const signWith = (signingSecret: string, signingInput: string) =>
  createHmac("sha256", signingSecret).update(signingInput).digest("base64url")
const token = (header: unknown, claims: unknown, options: { readonly secret?: string } = {}) => {
  const signingInput = `${segment(header)}.${segment(claims)}`
  return `${signingInput}.${signWith(options.secret ?? secret, signingInput)}`
}

const hs256 = { alg: "HS256", typ: "JWT" }
const good = { sub: "learner-1", role: "USER", exp: nowSeconds + 60 }

const corpus: ReadonlyArray<readonly [string, string]> = [
  ["valid", token(hs256, good)],
  ["valid with iat and nbf now", token(hs256, { ...good, iat: nowSeconds, nbf: nowSeconds })],
  ["valid with crit b64 true", token({ ...hs256, crit: ["b64"], b64: true }, good)],
  ["expired now", token(hs256, { ...good, exp: nowSeconds })],
  ["expired a second ago", token(hs256, { ...good, exp: nowSeconds - 1 })],
  ["exp a fraction later", token(hs256, { ...good, exp: nowSeconds + 0.5 })],
  ["nbf in the future", token(hs256, { ...good, nbf: nowSeconds + 1 })],
  ["nbf as a string", token(hs256, { ...good, nbf: String(nowSeconds) })],
  ["iat as a string", token(hs256, { ...good, iat: "yesterday" })],
  ["exp as a string", token(hs256, { ...good, exp: String(nowSeconds + 60) })],
  ["exp null", token(hs256, { ...good, exp: null })],
  ["no exp", token(hs256, { sub: "learner-1", role: "USER" })],
  ["no sub", token(hs256, { role: "USER", exp: nowSeconds + 60 })],
  ["alg none", `${segment({ alg: "none" })}.${segment(good)}.`],
  ["alg HS512", token({ alg: "HS512" }, good)],
  ["alg hs256 lower case", token({ alg: "hs256" }, good)],
  ["no alg", token({ typ: "JWT" }, good)],
  ["alg not a string", token({ alg: 256 }, good)],
  ["wrong secret", token(hs256, good, { secret: `${secret}-other` })],
  ["crit unknown", token({ ...hs256, crit: ["exp"] }, good)],
  ["crit b64 false", token({ ...hs256, crit: ["b64"], b64: false }, good)],
  ["crit empty", token({ ...hs256, crit: [] }, good)],
  ["header not JSON", token("{not json", good)],
  ["header an array", token([hs256], good)],
  ["claims not JSON", token(hs256, "{not json")],
  ["claims an array", token(hs256, [good])],
  ["claims null", token(hs256, "null")],
  ["two segments", `${segment(hs256)}.${segment(good)}`],
  ["four segments", `${token(hs256, good)}.x`],
  ["empty signature", `${segment(hs256)}.${segment(good)}.`],
  ["signature with padding", `${token(hs256, good)}=`],
  ["signature with wrong padding", `${token(hs256, good)}==`],
  [
    "claims of length 1 mod 4",
    (() => {
      const signingInput = `${segment(hs256)}.${segment(good)}A`
      return `${signingInput}.${signWith(secret, signingInput)}`
    })()
  ],
  ["signature in base64 alphabet", token(hs256, good).replace(/-/g, "+").replace(/_/g, "/") + "+/"],
  [
    "tampered claims",
    (() => {
      const [h, , s] = token(hs256, good).split(".")
      return `${h}.${segment({ ...good, role: "SUPER_ADMIN" })}.${s}`
    })()
  ],
  [
    "claims with invalid UTF-8",
    (() => {
      const signingInput = `${segment(hs256)}.${Buffer.from([0x7b, 0xff, 0x7d]).toString("base64url")}`
      return `${signingInput}.${signWith(secret, signingInput)}`
    })()
  ],
  ["garbage", "not-a-token"]
]

const joseAccepts = (candidate: string) =>
  jwtVerify(candidate, key, { algorithms: ["HS256"], requiredClaims: ["sub", "exp"], currentDate: new Date(now) })
    .then(() => true, () => false)

describe("HS256 verification with node:crypto", () => {
  it.each(corpus)("agrees with jose's jwtVerify: %s", async (_name, candidate) => {
    expect(Either.isRight(verifyHs256(candidate, key, now))).toBe(await joseAccepts(candidate))
  })

  it("the corpus has tokens of both outcomes, so the comparison can fail", async () => {
    const outcomes = await Promise.all(corpus.map(([, candidate]) => joseAccepts(candidate)))
    expect(outcomes.filter(Boolean).length).toBe(5)
  })

  it("is stricter than jose on exp: not finite (1e309) or more than a year ahead is refused", async () => {
    const infinite = token(hs256, JSON.stringify(good).replace(/"exp":\d+/, "\"exp\":1e309"))
    const distant = token(hs256, { ...good, exp: nowSeconds + 366 * 24 * 3600 })
    const withinAYear = token(hs256, { ...good, exp: nowSeconds + 364 * 24 * 3600 })
    for (const refused of [infinite, distant]) {
      expect(await joseAccepts(refused)).toBe(true)
      expect(verifyHs256(refused, key, now)).toEqual(Either.left("claim exp too far ahead"))
    }
    expect(Either.isRight(verifyHs256(withinAYear, key, now))).toBe(true)
  })

  it.effect("verifyToken reads time from the Clock and the claims through the schema", () =>
    Effect.gen(function*() {
      const minted = yield* signToken({ sub: "learner-1", role: "USER", expiresInSeconds: 60 }, Redacted.make(secret))
      expect(yield* verifyToken(minted, Redacted.make(secret))).toEqual({ userId: "learner-1", role: "USER" })
      const badRole = token(hs256, { ...good, role: "ROOT", exp: 61 })
      const refused = yield* Effect.flip(verifyToken(badRole, Redacted.make(secret)))
      expect(refused.reason).toBe("claims do not match (sub, role, exp)")
      const expired = yield* Effect.flip(verifyToken(token(hs256, { ...good, exp: 0 }), Redacted.make(secret)))
      expect(expired.reason).toBe("expired")
    }))
})
