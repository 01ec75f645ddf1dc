import { describe, expect, it } from "@effect/vitest"
import { Effect, HashMap, Redacted } from "effect"
import { SignJWT } from "jose"
import { createHmac } from "node:crypto"
import { signToken } from "../../src/http/AuthTokens.js"
import { MemoryDatabase } from "../../src/layers/memory/MemoryDatabase.js"
import { makeSigningKey, signWith, startIdentityProvider } from "../support/identityProvider.js"
import {
  bodyAs,
  ErrorBody,
  JobBody,
  jwtSecret,
  memoryEngine,
  runtimeToken,
  startApi,
  tokenFor
} from "./support/harness.js"
import { adminRoutes, internalRoute, protectedRoutes, type Route, userRoutes } from "./support/routes.js"

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value), "utf8").toString("base64url")
const nowSeconds = () => Math.floor(Date.now() / 1000)
const secretBytes = new TextEncoder().encode(jwtSecret)

/** Each way a bearer credential can be wrong, as the Authorization header to send (undefined: none). */
const badAuthorizations = Effect.gen(function*() {
  const valid = yield* tokenFor("user-a")
  const otherSecret = yield* signToken(
    { sub: "user-a", role: "USER" },
    Redacted.make("another-secret-another-secret-0123456789")
  )
  const expired = yield* tokenFor("user-a", "USER", -60)
  const algNone = `${b64url({ alg: "none", typ: "JWT" })}.${
    b64url({ sub: "user-a", role: "USER", exp: nowSeconds() + 3600 })
  }.`
  const hs512 = yield* Effect.promise(() =>
    new SignJWT({ role: "USER" }).setProtectedHeader({ alg: "HS512" }).setSubject("user-a").setExpirationTime(
      nowSeconds() + 3600
    ).sign(secretBytes)
  )
  const noExp = yield* Effect.promise(() =>
    new SignJWT({ role: "USER" }).setProtectedHeader({ alg: "HS256" }).setSubject("user-a").sign(secretBytes)
  )
  const noSub = yield* Effect.promise(() =>
    new SignJWT({ role: "USER" }).setProtectedHeader({ alg: "HS256" }).setExpirationTime(nowSeconds() + 3600).sign(
      secretBytes
    )
  )
  const badRole = yield* Effect.promise(() =>
    new SignJWT({ role: "ROOT" }).setProtectedHeader({ alg: "HS256" }).setSubject("user-a").setExpirationTime(
      nowSeconds() + 3600
    ).sign(secretBytes)
  )
  const tampered = `${valid.split(".")[0]}.${
    b64url({ sub: "user-b", role: "SUPER_ADMIN", exp: nowSeconds() + 3600 })
  }.${valid.split(".")[2]}`
  // exp=1e309 parses as Infinity: a token that never expires.
  const endless = yield* Effect.sync(() => {
    const signingInput = `${b64url({ alg: "HS256", typ: "JWT" })}.${
      Buffer.from("{\"sub\":\"user-a\",\"role\":\"USER\",\"exp\":1e309}").toString("base64url")
    }`
    return `${signingInput}.${createHmac("sha256", jwtSecret).update(signingInput).digest("base64url")}`
  })
  const distant = yield* tokenFor("user-a", "USER", 2 * 366 * 24 * 3600)
  const cases: ReadonlyArray<readonly [string, string | undefined]> = [
    ["missing header", undefined],
    ["empty header", ""],
    ["scheme without token", "Bearer"],
    ["empty token", "Bearer "],
    ["malformed token", "Bearer not-a-jwt"],
    ["three garbage segments", "Bearer aaa.bbb.ccc"],
    ["bad signature", `Bearer ${otherSecret}`],
    ["tampered payload", `Bearer ${tampered}`],
    ["alg none", `Bearer ${algNone}`],
    ["HS512 instead of HS256", `Bearer ${hs512}`],
    ["expired", `Bearer ${expired}`],
    ["no exp claim", `Bearer ${noExp}`],
    ["exp 1e309 (never expires)", `Bearer ${endless}`],
    ["exp two years ahead", `Bearer ${distant}`],
    ["no sub claim", `Bearer ${noSub}`],
    ["unknown role", `Bearer ${badRole}`],
    ["Basic scheme", "Basic dXNlcjpwYXNz"],
    ["a 7-character scheme that is not Bearer", `Xearer ${valid}`],
    ["two tokens", `Bearer ${valid} ${valid}`]
  ]
  return cases
})

describe("authentication", () => {
  it.live("every bad-token case is 401 UNAUTHORIZED on every protected route, and nothing is written", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine())
        const owner = yield* tokenFor("user-a")
        const created = yield* api.request("POST", "/api/ai/flashcard-generations", {
          token: owner,
          body: { sourceText: "text", count: 1 }
        })
        const job = yield* bodyAs(JobBody)(created)
        const cases = yield* badAuthorizations
        const routes = protectedRoutes(job.jobId, "00000000-0000-7000-8000-000000000001")
        const failures: Array<string> = []
        for (const [name, authorization] of cases) {
          for (const route of routes) {
            const response = yield* api.request(route.method, route.path, { authorization, body: route.body })
            const body = yield* bodyAs(ErrorBody)(response).pipe(Effect.option)
            if (response.status !== 401 || body._tag === "None" || body.value.code !== "UNAUTHORIZED") {
              failures.push(`${name}: ${route.method} ${route.path} → ${response.status} ${response.text}`)
            }
          }
        }
        expect(failures).toEqual([])
        const challenged = yield* api.request("GET", "/api/ai/jobs")
        expect(challenged.headers.get("www-authenticate")).toMatch(/^Bearer/)
        const tables = yield* api.run(Effect.flatMap(MemoryDatabase, (db) => db.snapshot))
        expect(HashMap.size(tables.aiJob)).toBe(1)
        expect(HashMap.size(tables.userModelCredential)).toBe(0)
      })
    ))

  it.live("a valid token passes on every user route (never 401/403)", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine())
        const token = yield* tokenFor("user-a")
        const created = yield* api.request("POST", "/api/ai/feynman-evaluations", {
          token,
          body: { concept: "c", explanation: "e" }
        })
        const job = yield* bodyAs(JobBody)(created)
        for (const route of userRoutes(job.jobId)) {
          const response = yield* api.request(route.method, route.path, { token, body: route.body })
          expect([401, 403], `${route.method} ${route.path}: ${response.text}`).not.toContain(response.status)
        }
        // The scheme name is case-insensitive (RFC 7235).
        const lower = yield* api.request("GET", "/api/ai/jobs", { authorization: `bearer ${token}` })
        expect(lower.status).toBe(200)
      })
    ))

  it.live("a USER gets 403 FORBIDDEN on every admin route; a SUPER_ADMIN passes", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine())
        const user = yield* tokenFor("user-a")
        const admin = yield* tokenFor("admin-1", "SUPER_ADMIN")
        const created = yield* api.request("POST", "/api/ai/flashcard-generations", {
          token: user,
          body: { sourceText: "text", count: 1 }
        })
        const job = yield* bodyAs(JobBody)(created)
        for (const route of adminRoutes(job.jobId, "00000000-0000-7000-8000-000000000001")) {
          const refused = yield* api.request(route.method, route.path, { token: user, body: route.body })
          expect(refused.status, `${route.method} ${route.path}`).toBe(403)
          expect(yield* bodyAs(ErrorBody)(refused)).toEqual({ code: "FORBIDDEN", message: expect.any(String) })
          const allowed = yield* api.request(route.method, route.path, { token: admin, body: route.body })
          expect([401, 403], `${route.method} ${route.path}: ${allowed.text}`).not.toContain(allowed.status)
        }
      })
    ))

  it.live("the internal route takes only the runtime service token", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine())
        const route = internalRoute("00000000-0000-7000-8000-000000000000", "00000000-0000-7000-8000-000000000002")
        const user = yield* tokenFor("user-a")
        const admin = yield* tokenFor("admin-1", "SUPER_ADMIN")
        for (
          const authorization of [
            undefined,
            "Bearer ",
            `Bearer ${user}`,
            `Bearer ${admin}`,
            `Bearer ${runtimeToken}x`,
            `Bearer ${runtimeToken.slice(0, -1)}`,
            runtimeToken
          ]
        ) {
          const response = yield* api.request(route.method, route.path, { authorization, body: route.body })
          expect(response.status, String(authorization)).toBe(401)
          expect(yield* bodyAs(ErrorBody)(response)).toMatchObject({ code: "UNAUTHORIZED" })
        }
        const accepted = yield* api.request(route.method, route.path, { token: runtimeToken, body: route.body })
        expect(accepted.status).toBe(404)
        expect(yield* bodyAs(ErrorBody)(accepted)).toMatchObject({ code: "CREDENTIAL_NOT_FOUND" })
      })
    ))

  it.live("without RUNTIME_SERVICE_TOKEN configured the internal route refuses everyone", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine(), { runtimeServiceToken: undefined })
        const route = internalRoute("00000000-0000-7000-8000-000000000000", "00000000-0000-7000-8000-000000000002")
        const response = yield* api.request(route.method, route.path, { token: runtimeToken, body: route.body })
        expect(response.status).toBe(401)
      })
    ))
})

const audience = "ai-job-engine"
const rsaKey = makeSigningKey("RS256", "rsa-1")
const ecKey = makeSigningKey("ES256", "ec-1")
const edKey = makeSigningKey("EdDSA", "ed-1")
const strangerKey = makeSigningKey("RS256", "stranger")

/**
 * The status a route answers with, without waiting for a stream's end: an SSE answer's body is
 * dropped once its headers are in.
 */
const statusOf = (baseUrl: string, route: Route, token: string) =>
  Effect.promise(async () => {
    const controller = new AbortController()
    const response = await fetch(`${baseUrl}${route.path}`, {
      method: route.method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(route.body === undefined ? {} : { "content-type": "application/json" })
      },
      body: route.body === undefined ? undefined : JSON.stringify(route.body),
      signal: controller.signal
    })
    controller.abort()
    return response.status
  })

/** The routes that follow a job live: the SSE stream and the long poll. */
const liveRoutes = (jobId: string): ReadonlyArray<Route> => [
  { method: "GET", path: `/api/ai/jobs/${jobId}/events` },
  { method: "GET", path: `/api/ai/jobs/${jobId}?waitFor=terminal&timeoutMs=50` }
]

/**
 * The API with a local identity provider (Keycloak-style: roles in `realm_access.roles`), and
 * with or without the HS256 secret beside it.
 */
const providerApi = (options: { readonly withSecret: boolean }) =>
  Effect.gen(function*() {
    const idp = yield* startIdentityProvider([rsaKey, ecKey, edKey])
    const api = yield* startApi(memoryEngine(), {
      auth: {
        jwtSecret: options.withSecret ? jwtSecret : undefined,
        identityProvider: { issuer: idp.issuer, audiences: [audience], roleClaim: "realm_access.roles" }
      }
    })
    const claims = (sub: string, roles: ReadonlyArray<string> = []) => ({
      iss: idp.issuer,
      aud: audience,
      sub,
      exp: nowSeconds() + 600,
      realm_access: { roles: [...roles] }
    })
    return { api, idp, claims }
  })

describe("authentication with an identity provider's tokens", () => {
  it.live(
    "RS256, ES256 and EdDSA tokens pass on every user route and the live ones; roles from realm_access.roles open the admin routes and /metrics",
    () =>
      Effect.scoped(
        Effect.gen(function*() {
          const { api, claims } = yield* providerApi({ withSecret: false })
          for (const key of [rsaKey, ecKey, edKey]) {
            const token = yield* signWith(key, claims(`learner-${key.kid}`))
            const created = yield* api.request("POST", "/api/ai/flashcard-generations", {
              token,
              body: { sourceText: "text", count: 1 }
            })
            expect(created.status, `${key.alg}: ${created.text}`).toBe(202)
            const job = yield* bodyAs(JobBody)(created)
            for (const route of [...liveRoutes(job.jobId), ...userRoutes(job.jobId)]) {
              expect([401, 403], `${key.alg} ${route.method} ${route.path}`).not.toContain(
                yield* statusOf(api.baseUrl, route, token)
              )
            }
          }
          const user = yield* signWith(rsaKey, claims("learner-9", ["offline_access"]))
          const admin = yield* signWith(ecKey, claims("ops-1", ["offline_access", "SUPER_ADMIN"]))
          const created = yield* api.request("POST", "/api/ai/feynman-evaluations", {
            token: user,
            body: { concept: "c", explanation: "e" }
          })
          const job = yield* bodyAs(JobBody)(created)
          for (const route of adminRoutes(job.jobId, "00000000-0000-7000-8000-000000000001")) {
            expect(
              (yield* api.request(route.method, route.path, { token: user, body: route.body })).status,
              `${route.method} ${route.path}`
            ).toBe(403)
            const allowed = yield* api.request(route.method, route.path, { token: admin, body: route.body })
            expect([401, 403], `${route.method} ${route.path}: ${allowed.text}`).not.toContain(allowed.status)
          }
          // The console signs in with the admin API's stats; /metrics takes a SUPER_ADMIN token.
          expect((yield* api.request("GET", "/admin-api/ai/stats", { token: admin })).status).toBe(200)
          expect((yield* api.request("GET", "/metrics", { token: admin })).status).toBe(200)
          expect((yield* api.request("GET", "/metrics", { token: user })).status).toBe(401)
          // An admin sees the user's job on the live routes too.
          for (const route of liveRoutes(job.jobId)) {
            expect(yield* statusOf(api.baseUrl, route, admin), route.path).toBe(200)
          }
        })
      ),
    { timeout: 60_000 }
  )

  it.live(
    "every bad provider token is 401 on every protected route, the live ones and /metrics; HS256 is 401 without AUTH_JWT_SECRET",
    () =>
      Effect.scoped(
        Effect.gen(function*() {
          const { api, claims, idp } = yield* providerApi({ withSecret: false })
          const good = claims("learner-1")
          const owner = yield* signWith(rsaKey, good)
          const job = yield* bodyAs(JobBody)(
            yield* api.request("POST", "/api/ai/flashcard-generations", {
              token: owner,
              body: { sourceText: "text", count: 1 }
            })
          )
          const valid = owner.split(".")
          const cases: ReadonlyArray<readonly [string, string]> = [
            ["wrong issuer", yield* signWith(rsaKey, { ...good, iss: `${idp.issuer}-other` })],
            ["wrong audience", yield* signWith(rsaKey, { ...good, aud: "account" })],
            ["expired", yield* signWith(rsaKey, { ...good, exp: nowSeconds() - 120 })],
            ["not yet valid", yield* signWith(rsaKey, { ...good, nbf: nowSeconds() + 600 })],
            ["unknown kid", yield* signWith(strangerKey, good)],
            ["signed by another key under a known kid", yield* signWith(strangerKey, good, { kid: "rsa-1" })],
            ["alg none", `${b64url({ alg: "none", typ: "JWT" })}.${valid[1]}.`],
            ["HS256 without AUTH_JWT_SECRET", yield* tokenFor("learner-1", "SUPER_ADMIN")],
            [
              "tampered payload",
              `${valid[0]}.${b64url({ ...good, realm_access: { roles: ["SUPER_ADMIN"] } })}.${valid[2]}`
            ],
            ["a sub outside the rule", yield* signWith(rsaKey, { ...good, sub: "learner 1" })]
          ]
          const routes = [
            ...liveRoutes(job.jobId),
            ...protectedRoutes(job.jobId, "00000000-0000-7000-8000-000000000001"),
            { method: "GET", path: "/metrics" }
          ]
          const failures: Array<string> = []
          for (const [name, token] of cases) {
            for (const route of routes) {
              const status = yield* statusOf(api.baseUrl, route, token)
              if (status !== 401) failures.push(`${name}: ${route.method} ${route.path} → ${status}`)
            }
          }
          expect(failures).toEqual([])
          // The key set was fetched for the first token; unknown kids within the cooldown fetched nothing more.
          expect(idp.served()).toEqual({ discovery: 1, jwks: 1 })
        })
      ),
    { timeout: 60_000 }
  )

  it.live("with AUTH_JWT_SECRET and AUTH_ISSUER both set, both kinds of token are accepted", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, claims } = yield* providerApi({ withSecret: true })
        const hs256 = yield* tokenFor("learner-1")
        const provider = yield* signWith(edKey, claims("learner-1"))
        const created = yield* api.request("POST", "/api/ai/flashcard-generations", {
          token: hs256,
          body: { sourceText: "text", count: 1 }
        })
        const job = yield* bodyAs(JobBody)(created)
        // The same user id, whichever issuer vouches for it.
        expect((yield* api.request("GET", `/api/ai/jobs/${job.jobId}`, { token: provider })).status).toBe(200)
        expect(
          (yield* api.request("GET", "/admin-api/ai/stats", { token: yield* tokenFor("ops-1", "SUPER_ADMIN") })).status
        ).toBe(200)
      })
    ))
})
