import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { JobStatusResponse } from "../../src/http/ApiSchemas.js"
import { makeSigningKey, signWith, startIdentityProvider } from "../support/identityProvider.js"
import {
  createJob,
  decodeBody,
  engineEnv,
  engineStorage,
  flashcardRequest,
  getJob,
  httpRequest,
  startProgram
} from "./support/engine.js"

/**
 * The API process (`dist/api.js` on MySQL and Redis) with tokens from an identity provider the
 * test serves on 127.0.0.1 (discovery document and JWK Set, Keycloak's paths): no AUTH_JWT_SECRET
 * at all. What a deployment behind Keycloak sees: RS256 and ES256 tokens work, roles come from
 * `realm_access.roles`, a key the provider adds is picked up without a restart, keys already
 * fetched keep working while the provider is down, and the key set is not fetched per request.
 */

const audience = "ai-job-engine"

describe("tokens from an identity provider", () => {
  it.live(
    "RS256 and ES256 tokens create and read jobs, roles from realm_access.roles, a new key without restart, known keys while the provider is down",
    () =>
      Effect.gen(function*() {
        const rsa = makeSigningKey("RS256", "rsa-1")
        const ec = makeSigningKey("ES256", "ec-1")
        const idp = yield* startIdentityProvider([rsa, ec])
        const storage = yield* engineStorage("identity_provider")
        const env = engineEnv(storage, {
          AUTH_ISSUER: idp.issuer,
          AUTH_AUDIENCE: audience,
          AUTH_ROLE_CLAIM: "realm_access.roles",
          AUTH_JWKS_MAX_AGE_S: "2",
          AUTH_JWKS_COOLDOWN_S: "1"
        })
        delete env.AUTH_JWT_SECRET
        const api = yield* startProgram("api", "api", env)
        const claims = (sub: string, roles: ReadonlyArray<string>) => ({
          iss: idp.issuer,
          aud: audience,
          sub,
          exp: Math.floor(Date.now() / 1000) + 600,
          realm_access: { roles: [...roles] }
        })
        expect(idp.served()).toEqual({ discovery: 0, jwks: 0 })

        // RS256 creates, ES256 reads: one user, whichever of the provider's keys signed the token.
        const rsaToken = yield* signWith(rsa, claims("learner-1", ["offline_access"]))
        const ecToken = yield* signWith(ec, claims("learner-1", ["offline_access"]))
        const created = yield* createJob(api.baseUrl, rsaToken, "flashcard-generations", flashcardRequest(1))
        expect((yield* getJob(api.baseUrl, ecToken, created.jobId)).jobId).toBe(created.jobId)
        const ecCreated = yield* createJob(api.baseUrl, ecToken, "flashcard-generations", flashcardRequest(2))
        expect(ecCreated.lifecycleStatus).toBe("queued")

        // Many reads, few fetches: the key set is cached (2 s here), not fetched per request.
        const started = Date.now()
        const reads = 40
        for (let i = 0; i < reads; i++) yield* getJob(api.baseUrl, i % 2 === 0 ? rsaToken : ecToken, created.jobId)
        const elapsedS = (Date.now() - started) / 1000
        expect(idp.served().discovery).toBe(1)
        expect(idp.served().jwks).toBeLessThanOrEqual(2 + Math.ceil(elapsedS / 2))
        expect(idp.served().jwks).toBeLessThan(reads / 4)

        // Roles from realm_access.roles: SUPER_ADMIN opens the admin API, anyone else gets 403.
        const adminToken = yield* signWith(ec, claims("ops-1", ["offline_access", "SUPER_ADMIN"]))
        expect(
          (yield* httpRequest("GET", `${api.baseUrl}/admin-api/ai/jobs/${created.jobId}`, { token: adminToken })).status
        ).toBe(200)
        expect(
          (yield* httpRequest("GET", `${api.baseUrl}/admin-api/ai/jobs/${created.jobId}`, { token: rsaToken })).status
        ).toBe(403)

        // The provider adds a key: a token signed with it works at once (one refetch for its kid).
        const rotated = makeSigningKey("RS256", "rsa-2")
        idp.publish([rsa, ec, rotated])
        yield* Effect.sleep(Duration.seconds(1.1)) // the refetch cooldown since the last fetch
        const rotatedToken = yield* signWith(rotated, claims("learner-1", []))
        const read = yield* httpRequest("GET", `${api.baseUrl}/api/ai/jobs/${created.jobId}`, { token: rotatedToken })
        expect(read.status).toBe(200)
        expect((yield* decodeBody(JobStatusResponse)(read)).jobId).toBe(created.jobId)

        // The provider goes away: past the cache's 2 s, known keys still verify; an unknown one cannot.
        yield* idp.shutDown
        yield* Effect.sleep(Duration.seconds(2.5))
        for (const token of [rsaToken, ecToken, rotatedToken]) {
          expect((yield* httpRequest("GET", `${api.baseUrl}/api/ai/jobs/${created.jobId}`, { token })).status).toBe(200)
        }
        yield* api.waitForOutput(/identity provider keys could not be fetched/, Duration.seconds(10))
        const unknown = yield* signWith(makeSigningKey("RS256", "rsa-3"), claims("learner-1", []))
        expect((yield* httpRequest("GET", `${api.baseUrl}/api/ai/jobs/${created.jobId}`, { token: unknown })).status)
          .toBe(401)
        expect((yield* httpRequest("GET", `${api.baseUrl}/api/ai/jobs/${created.jobId}`, { token: ecToken })).status)
          .toBe(200)
      }).pipe(Effect.scoped),
    { timeout: 90_000 }
  )
})
