import { expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Option, Redacted } from "effect"
import { randomBytes, randomUUID } from "node:crypto"
import type { CredentialError } from "../../src/domain/ExecutionError.js"
import type { PersistenceError } from "../../src/domain/PersistenceError.js"
import { CredentialRepository } from "../../src/services/CredentialRepository.js"
import { CredentialVault, makeCredentialVault, makeKeyring } from "../../src/services/CredentialVault.js"
import { UsageLog } from "../../src/services/UsageLog.js"
import { CANARY_KEY } from "../support/canary.js"

/**
 * The ONE contract of `UsageLog` (ai_usage_log) and `CredentialRepository` (user_model_credential),
 * with the `CredentialVault` on top, run against the memory and the MySQL implementations.
 */

const keyV1 = Redacted.make(randomBytes(32).toString("base64"))
const keyV2 = Redacted.make(randomBytes(32).toString("base64"))
const otherKey = Redacted.make(randomBytes(32).toString("base64"))
const platformKey = Redacted.make("sk-platform-not-the-canary")

const vaultV1 = CredentialVault.withOptions({
  keyring: makeKeyring(Option.some({ version: 1, key: keyV1 })),
  platformKey: Option.some(platformKey)
})

/** A vault over the same repository with another keyring. */
const vaultWith = (keyring: ReturnType<typeof makeKeyring>) =>
  Effect.flatMap(
    CredentialRepository,
    (repository) =>
      makeCredentialVault({ keyring, platformKey: Option.none() }).pipe(
        Effect.provideService(CredentialRepository, repository)
      )
  )

/** The code of a vault failure (a storage failure shows as its tag). */
const codeOf = (
  error: CredentialError | PersistenceError
) => (error._tag === "CredentialError" ? error.code : error._tag)

const user = () => `user-${randomUUID()}`

const usageEntry = (
  jobId: string,
  attemptNo: number,
  overrides: Partial<Parameters<UsageLog["Type"]["record"]>[0]> = {}
) => ({
  id: randomUUID(),
  jobId,
  leaseNo: 1,
  attemptNo,
  credentialMode: "platform_key",
  provider: "deepseek",
  model: "deepseek-chat",
  promptTokens: 120,
  completionTokens: 80,
  totalTokens: 200,
  costMicros: 68,
  latencyMs: 350,
  errorCode: null,
  ...overrides
})

export const credentialAndUsageContract = <E>(
  name: string,
  storage: Layer.Layer<UsageLog | CredentialRepository, E>
) => {
  it.layer(Layer.provideMerge(vaultV1, storage), { timeout: "60 seconds" })(name, (it) => {
    it.effect("usage log: records rows and lists a job's rows by attempt", () =>
      Effect.gen(function*() {
        const usage = yield* UsageLog
        const jobId = randomUUID()
        const second = yield* usage.record(usageEntry(jobId, 2, { errorCode: null, costMicros: 12_345_678_901 }))
        const first = yield* usage.record(
          usageEntry(jobId, 1, {
            errorCode: "PROVIDER_UNAVAILABLE",
            promptTokens: 0,
            completionTokens: 0,
            totalTokens: 0,
            costMicros: 0
          })
        )
        yield* usage.record(usageEntry(randomUUID(), 1))
        expect(second.createdAt).toBeInstanceOf(Date)
        expect(second.costMicros).toBe(12_345_678_901)
        const rows = yield* usage.listByJobId(jobId)
        expect(rows.map((row) => row.attemptNo)).toEqual([1, 2])
        expect(rows[0]).toEqual(first)
        expect(rows[0]?.errorCode).toBe("PROVIDER_UNAVAILABLE")
        expect(rows[1]?.errorCode).toBeNull()
        expect(yield* usage.listByJobId(randomUUID())).toEqual([])
      }))

    it.effect("usage log: a call is numbered once per job and lease; another lease may use the same number", () =>
      Effect.gen(function*() {
        const usage = yield* UsageLog
        const jobId = randomUUID()
        yield* usage.record(usageEntry(jobId, 1, { leaseNo: 1 }))
        // A zombie (lease 1) and its successor (lease 2) both make their first call.
        yield* usage.record(usageEntry(jobId, 1, { leaseNo: 2 }))
        const duplicate = yield* Effect.either(usage.record(usageEntry(jobId, 1, { leaseNo: 2, errorCode: "TIMEOUT" })))
        expect(duplicate._tag === "Left" && duplicate.left._tag).toBe("PersistenceError")
        const rows = yield* usage.listByJobId(jobId)
        expect(rows.map((row) => [row.leaseNo, row.attemptNo, row.errorCode])).toEqual([[1, 1, null], [2, 1, null]])
      }))

    it.effect("credentials: a new key revokes the user's previous active key of that provider only", () =>
      Effect.gen(function*() {
        const repository = yield* CredentialRepository
        const userId = user()
        const base = {
          userId,
          encryptedKey: "ZW5j",
          iv: "aXY=",
          authTag: "dGFn",
          keyVersion: 1,
          keyFingerprint: "f".repeat(64)
        }
        const first = yield* repository.insertReplacingActive({ ...base, id: randomUUID(), provider: "deepseek" })
        const other = yield* repository.insertReplacingActive({ ...base, id: randomUUID(), provider: "openai" })
        const second = yield* repository.insertReplacingActive({ ...base, id: randomUUID(), provider: "deepseek" })
        expect(first.revokedAt).toBeNull()
        expect(Option.map(yield* repository.findActive(userId, "deepseek"), (row) => row.id)).toEqual(
          Option.some(second.id)
        )
        expect(Option.map(yield* repository.findActive(userId, "openai"), (row) => row.id)).toEqual(
          Option.some(other.id)
        )
        const reread = yield* repository.findById(first.id)
        expect(Option.map(reread, (row) => row.revokedAt !== null)).toEqual(Option.some(true))
        const listed = yield* repository.listByUser(userId)
        expect(new Set(listed.map((row) => row.id))).toEqual(new Set([first.id, other.id, second.id]))
        expect(yield* repository.listByUser(user())).toEqual([])
      }))

    it.effect("credentials: revoke only an active key of its owner", () =>
      Effect.gen(function*() {
        const repository = yield* CredentialRepository
        const userId = user()
        const row = yield* repository.insertReplacingActive({
          id: randomUUID(),
          userId,
          provider: "deepseek",
          encryptedKey: "ZW5j",
          iv: "aXY=",
          authTag: "dGFn",
          keyVersion: 1,
          keyFingerprint: "a".repeat(64)
        })
        expect(yield* repository.revoke(row.id, user())).toBe(false)
        expect(yield* repository.revoke(row.id, userId)).toBe(true)
        expect(yield* repository.revoke(row.id, userId)).toBe(false)
        expect(yield* repository.revoke(randomUUID(), userId)).toBe(false)
        expect(yield* repository.findActive(userId, "deepseek")).toEqual(Option.none())
      }))

    it.effect("credentials: user ids compare exactly: the owner with a trailing space is another user", () =>
      Effect.gen(function*() {
        const repository = yield* CredentialRepository
        const owner = user()
        const padded = `${owner} `
        const row = yield* repository.insertReplacingActive({
          id: randomUUID(),
          userId: owner,
          provider: "deepseek",
          encryptedKey: "ZW5j",
          iv: "aXY=",
          authTag: "dGFn",
          keyVersion: 1,
          keyFingerprint: "b".repeat(64)
        })
        expect(yield* repository.findActive(padded, "deepseek")).toEqual(Option.none())
        expect(yield* repository.listByUser(padded)).toEqual([])
        expect(yield* repository.revoke(row.id, padded)).toBe(false)
        // The padded user's own key does not revoke the owner's either.
        yield* repository.insertReplacingActive({
          id: randomUUID(),
          userId: padded,
          provider: "deepseek",
          encryptedKey: "ZW5j",
          iv: "aXY=",
          authTag: "dGFn",
          keyVersion: 1,
          keyFingerprint: "c".repeat(64)
        })
        expect(Option.map(yield* repository.findActive(owner, "deepseek"), (active) => active.id)).toEqual(
          Option.some(row.id)
        )
        expect((yield* repository.listByUser(padded)).map((listed) => listed.userId)).toEqual([padded])
      }))

    it.effect("credentials: a user's keys are listed newest first, equal times by id from the highest; stale keys by id, at most `limit`", () =>
      Effect.gen(function*() {
        const repository = yield* CredentialRepository
        const userId = user()
        const base = { userId, encryptedKey: "ZW5j", iv: "aXY=", authTag: "dGFn", keyFingerprint: "d".repeat(64) }
        const providers = ["p-1", "p-2", "p-3", "p-4"]
        for (const provider of providers) {
          yield* repository.insertReplacingActive({ ...base, id: randomUUID(), provider, keyVersion: 4_000_001 })
        }
        const listed = yield* repository.listByUser(userId)
        const newestFirst = [...listed].sort((a, b) =>
          b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1)
        )
        expect(listed.map((row) => row.id)).toStrictEqual(newestFirst.map((row) => row.id))
        expect(new Set(listed.map((row) => row.provider))).toStrictEqual(new Set(providers))
        // Every other row of the store is stale for this version too: the order and the limit are what is checked.
        const stale = yield* repository.listStale(4_000_002, 100_000)
        expect(stale.map((row) => row.id)).toStrictEqual(stale.map((row) => row.id).sort())
        expect(stale.map((row) => row.id)).toEqual(expect.arrayContaining(listed.map((row) => row.id)))
        expect((yield* repository.listStale(4_000_002, 2)).map((row) => row.id)).toStrictEqual(
          stale.slice(0, 2).map((row) => row.id)
        )
        expect((yield* repository.listStale(4_000_001, 100_000)).some((row) => row.userId === userId)).toBe(false)
      }))

    it.effect("credentials: re-encryption is a compare-and-set on the key version", () =>
      Effect.gen(function*() {
        const repository = yield* CredentialRepository
        const row = yield* repository.insertReplacingActive({
          id: randomUUID(),
          userId: user(),
          provider: "deepseek",
          encryptedKey: "b2xk",
          iv: "aXY=",
          authTag: "dGFn",
          keyVersion: 7,
          keyFingerprint: "b".repeat(64)
        })
        expect((yield* repository.listStale(8, 1000)).some((r) => r.id === row.id)).toBe(true)
        const next = { encryptedKey: "bmV3", iv: "aXYy", authTag: "dGFnMg==", keyVersion: 8 }
        expect(yield* repository.reencrypt(row.id, 6, next)).toBe(false)
        expect(yield* repository.reencrypt(row.id, 7, next)).toBe(true)
        expect(yield* repository.reencrypt(row.id, 7, next)).toBe(false)
        const updated = yield* repository.findById(row.id)
        expect(Option.map(updated, (r) => [r.encryptedKey, r.keyVersion])).toEqual(Option.some(["bmV3", 8]))
        expect((yield* repository.listStale(8, 1000)).some((r) => r.id === row.id)).toBe(false)
      }))

    it.effect("vault: the stored row never contains the plain key, and resolve decrypts it", () =>
      Effect.gen(function*() {
        const vault = yield* CredentialVault
        const repository = yield* CredentialRepository
        const userId = user()
        const stored = yield* vault.store({ userId, apiKey: Redacted.make(CANARY_KEY) })
        expect(yield* vault.activeCredentialId(userId)).toEqual(Option.some(stored.id))
        const row = Option.getOrThrow(yield* repository.findById(stored.id))
        const everything = JSON.stringify(row) + Buffer.from(row.encryptedKey, "base64").toString("latin1")
        expect(everything).not.toContain(CANARY_KEY)
        expect(everything).not.toContain(CANARY_KEY.slice(3, 20))
        expect(JSON.stringify(stored)).not.toContain(CANARY_KEY)
        const resolved = yield* vault.resolve({ mode: "user_deepseek_key", credentialId: stored.id, userId })
        expect(Redacted.value(resolved.apiKey)).toBe(CANARY_KEY)
        expect(resolved.credentialId).toBe(stored.id)
        expect(String(resolved.apiKey)).not.toContain(CANARY_KEY)
        expect(JSON.stringify(resolved)).not.toContain(CANARY_KEY)
      }))

    it.effect("vault: a wrong key, an unknown key version or a tampered row is CREDENTIAL_DECRYPT_FAILED", () =>
      Effect.gen(function*() {
        const vault = yield* CredentialVault
        const repository = yield* CredentialRepository
        const userId = user()
        const stored = yield* vault.store({ userId, apiKey: Redacted.make(CANARY_KEY) })
        const request = { mode: "user_deepseek_key" as const, credentialId: stored.id, userId }

        const wrongKey = yield* vaultWith(makeKeyring(Option.some({ version: 1, key: otherKey })))
        const wrong = yield* Effect.flip(wrongKey.resolve(request))
        expect(wrong._tag).toBe("CredentialError")
        expect(codeOf(wrong)).toBe("CREDENTIAL_DECRYPT_FAILED")
        expect(JSON.stringify(wrong) + String(wrong)).not.toContain(CANARY_KEY)

        const rotatedAway = yield* vaultWith(makeKeyring(Option.some({ version: 2, key: keyV2 })))
        expect(codeOf(yield* Effect.flip(rotatedAway.resolve(request)))).toBe("CREDENTIAL_DECRYPT_FAILED")

        // Another user's ciphertext moved onto this row fails authentication (the row id is in the AAD).
        const victim = yield* vault.store({ userId: user(), apiKey: Redacted.make("sk-another-user-key") })
        const victimRow = Option.getOrThrow(yield* repository.findById(victim.id))
        expect(yield* repository.reencrypt(stored.id, 1, { ...victimRow, keyVersion: 1 })).toBe(true)
        expect(codeOf(yield* Effect.flip(vault.resolve(request)))).toBe("CREDENTIAL_DECRYPT_FAILED")
      }))

    it.effect("vault: rotation re-encrypts old rows under the current key version", () =>
      Effect.gen(function*() {
        const vault = yield* CredentialVault
        const userId = user()
        const stored = yield* vault.store({ userId, apiKey: Redacted.make(CANARY_KEY) })
        const rotating = yield* vaultWith(makeKeyring(Option.some({ version: 2, key: keyV2 }), [[1, keyV1]]))
        expect(yield* rotating.rotate(10_000)).toBeGreaterThanOrEqual(1)
        const onlyV2 = yield* vaultWith(makeKeyring(Option.some({ version: 2, key: keyV2 })))
        const resolved = yield* onlyV2.resolve({ mode: "user_deepseek_key", credentialId: stored.id, userId })
        expect(Redacted.value(resolved.apiKey)).toBe(CANARY_KEY)
        expect(
          codeOf(yield* Effect.flip(vault.resolve({ mode: "user_deepseek_key", credentialId: stored.id, userId })))
        ).toBe(
          "CREDENTIAL_DECRYPT_FAILED"
        )
      }))

    it.effect("vault: resolve refuses missing, foreign and revoked credentials; platform key from config", () =>
      Effect.gen(function*() {
        const vault = yield* CredentialVault
        const userId = user()
        const stored = yield* vault.store({ userId, apiKey: Redacted.make(CANARY_KEY) })
        const resolveCode = (request: Parameters<CredentialVault["resolve"]>[0]) =>
          Effect.map(Effect.either(vault.resolve(request)), Either.match({ onLeft: codeOf, onRight: () => "ok" }))
        expect(yield* resolveCode({ mode: "user_deepseek_key", credentialId: null, userId })).toBe(
          "CREDENTIAL_NOT_FOUND"
        )
        expect(yield* resolveCode({ mode: "user_deepseek_key", credentialId: randomUUID(), userId })).toBe(
          "CREDENTIAL_NOT_FOUND"
        )
        expect(yield* resolveCode({ mode: "user_deepseek_key", credentialId: stored.id, userId: user() })).toBe(
          "CREDENTIAL_NOT_FOUND"
        )
        const platform = yield* vault.resolve({ mode: "platform_key", credentialId: null, userId })
        expect(platform.credentialId).toBeNull()
        expect(Redacted.value(platform.apiKey)).toBe(Redacted.value(platformKey))

        expect(codeOf(yield* Effect.flip(vault.revoke({ userId: user(), credentialId: stored.id })))).toBe(
          "CREDENTIAL_NOT_FOUND"
        )
        yield* vault.revoke({ userId, credentialId: stored.id })
        expect(yield* resolveCode({ mode: "user_deepseek_key", credentialId: stored.id, userId })).toBe(
          "CREDENTIAL_NOT_FOUND"
        )
        expect(yield* vault.activeCredentialId(userId)).toEqual(Option.none())

        const noPlatform = yield* vaultWith(makeKeyring(Option.none()))
        expect(codeOf(yield* Effect.flip(noPlatform.resolve({ mode: "platform_key", credentialId: null, userId }))))
          .toBe("CREDENTIAL_MISSING")
        expect(codeOf(yield* Effect.flip(noPlatform.store({ userId, apiKey: Redacted.make(CANARY_KEY) })))).toBe(
          "CREDENTIAL_MISSING"
        )
        expect(codeOf(yield* Effect.flip(vault.store({ userId, apiKey: Redacted.make("  ") })))).toBe(
          "CREDENTIAL_INVALID"
        )
      }))
  })
}
