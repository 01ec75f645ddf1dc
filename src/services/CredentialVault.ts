import { Effect, Either, Layer, Option, Redacted } from "effect"
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto"
import { CredentialKeyringSettings, keyFromBase64 } from "../config/CredentialKeyringSettings.js"
import { ProviderConfig } from "../config/EngineConfig.js"
import { ProviderSettings } from "../config/ProviderSettings.js"
import { type CredentialMode, userKeyProvider } from "../domain/CredentialMode.js"
import { CredentialError } from "../domain/ExecutionError.js"
import { newId } from "../domain/Ids.js"
import type { PersistenceError } from "../domain/PersistenceError.js"
import type { ResolvedCredential } from "./AiGateway.js"
import { type CredentialCiphertext, type CredentialRecord, CredentialRepository } from "./CredentialRepository.js"

/** What the API may show about a stored key: never the key, never the ciphertext. */
export interface CredentialSummary {
  readonly id: string
  readonly userId: string
  readonly provider: string
  readonly keyVersion: number
  readonly keyFingerprint: string
  readonly revokedAt: Date | null
  readonly createdAt: Date
}

/**
 * The encryption keys of `user_model_credential`: the current version encrypts, every listed
 * version decrypts. Rotation: configure a new key under a new version, keep the old one among
 * the previous keys until `CredentialVault.rotate` has re-encrypted every row.
 */
export interface CredentialKeyring {
  readonly currentVersion: number
  readonly keys: ReadonlyMap<number, Redacted.Redacted<Buffer>>
}

export const makeKeyring = (
  current: Option.Option<{ readonly version: number; readonly key: Redacted.Redacted<string> }>,
  previous: ReadonlyArray<readonly [number, Redacted.Redacted<string>]> = []
): CredentialKeyring => {
  const keys = new Map<number, Redacted.Redacted<Buffer>>()
  for (const [version, key] of previous) {
    Option.map(keyFromBase64(Redacted.value(key)), (buffer) => keys.set(version, Redacted.make(buffer)))
  }
  Option.map(
    current,
    ({ key, version }) =>
      Option.map(keyFromBase64(Redacted.value(key)), (buffer) => keys.set(version, Redacted.make(buffer)))
  )
  return { currentVersion: Option.match(current, { onNone: () => 0, onSome: (c) => c.version }), keys }
}

const ALGORITHM = "aes-256-gcm"

/** Binds a ciphertext to its row: moving it to another row or user fails authentication. */
const associatedData = (
  row: { readonly id: string; readonly userId: string; readonly provider: string },
  keyVersion: number
) => Buffer.from(`user_model_credential|${row.id}|${row.userId}|${row.provider}|v${keyVersion}`, "utf8")

export const encryptKey = (
  plain: Redacted.Redacted<string>,
  key: Redacted.Redacted<Buffer>,
  keyVersion: number,
  row: { readonly id: string; readonly userId: string; readonly provider: string }
): CredentialCiphertext => {
  const iv = randomBytes(12)
  const cipher = createCipheriv(ALGORITHM, Redacted.value(key), iv)
  cipher.setAAD(associatedData(row, keyVersion))
  const encrypted = Buffer.concat([cipher.update(Redacted.value(plain), "utf8"), cipher.final()])
  return {
    encryptedKey: encrypted.toString("base64"),
    iv: iv.toString("base64"),
    authTag: cipher.getAuthTag().toString("base64"),
    keyVersion
  }
}

/** Fails (Left) on a wrong key, a tampered row or a row moved to another user: GCM authenticates all three. */
export const decryptKey = (
  record: CredentialRecord,
  key: Redacted.Redacted<Buffer>
): Either.Either<Redacted.Redacted<string>, string> => {
  try {
    const iv = Buffer.from(record.iv, "base64")
    const tag = Buffer.from(record.authTag, "base64")
    if (iv.length !== 12 || tag.length !== 16) return Either.left("iv or auth tag has the wrong length")
    const decipher = createDecipheriv(ALGORITHM, Redacted.value(key), iv)
    decipher.setAAD(associatedData(record, record.keyVersion))
    decipher.setAuthTag(tag)
    const plain = Buffer.concat([decipher.update(Buffer.from(record.encryptedKey, "base64")), decipher.final()])
    return Either.right(Redacted.make(plain.toString("utf8")))
  } catch {
    // The crypto error says only that authentication failed; nothing of the key is in it.
    return Either.left("authentication failed (wrong key or tampered row)")
  }
}

export const fingerprintOf = (plain: Redacted.Redacted<string>): string =>
  createHash("sha256").update(Redacted.value(plain), "utf8").digest("hex")

const summaryOf = (record: CredentialRecord): CredentialSummary => ({
  id: record.id,
  userId: record.userId,
  provider: record.provider,
  keyVersion: record.keyVersion,
  keyFingerprint: record.keyFingerprint,
  revokedAt: record.revokedAt,
  createdAt: record.createdAt
})

export interface CredentialVaultOptions {
  readonly keyring: CredentialKeyring
  /** The platform key of `provider` (`AI_API_KEY` with a single provider). */
  readonly platformKey: Option.Option<Redacted.Redacted<string>>
  /** The provider user keys are stored for, and the platform's default unless `platformProvider` says (default `deepseek`). */
  readonly provider?: string
  /** The provider of the default route (`AI_PROVIDER`). */
  readonly platformProvider?: string
  /** Every provider's platform key, by provider name (`AI_PROVIDERS`); `platformKey` is the default provider's when absent. */
  readonly platformKeys?: ReadonlyMap<string, Redacted.Redacted<string>>
}

/**
 * The keys one job may present, each provider only its own: a platform-key job every provider's
 * platform key, a user-key job the user's key for that key's provider and nothing else. The fields
 * are the key of the job's own provider.
 */
export interface JobCredentials extends ResolvedCredential {
  readonly forProvider: (provider: string) => Option.Option<ResolvedCredential>
}

export const makeCredentialVault = (options: CredentialVaultOptions) =>
  Effect.gen(function*() {
    const repository = yield* CredentialRepository
    const { keyring } = options
    const defaultProvider = options.provider ?? userKeyProvider
    const platformProvider = options.platformProvider ?? defaultProvider
    const platformKeys: ReadonlyMap<string, Redacted.Redacted<string>> = options.platformKeys ??
      new Map(Option.toArray(Option.map(options.platformKey, (key) => [platformProvider, key] as const)))

    const decrypt = (record: CredentialRecord) => {
      const key = keyring.keys.get(record.keyVersion)
      if (key === undefined) {
        return Effect.fail(
          new CredentialError({
            code: "CREDENTIAL_DECRYPT_FAILED",
            message:
              `credential ${record.id} is encrypted under key version ${record.keyVersion}, which is not configured`
          })
        )
      }
      return Either.match(decryptKey(record, key), {
        onLeft: (reason) =>
          Effect.fail(
            new CredentialError({
              code: "CREDENTIAL_DECRYPT_FAILED",
              message: `credential ${record.id} (key version ${record.keyVersion}) cannot be decrypted: ${reason}`
            })
          ),
        onRight: (plain) =>
          fingerprintOf(plain) === record.keyFingerprint
            ? Effect.succeed(plain)
            : Effect.fail(
              new CredentialError({
                code: "CREDENTIAL_DECRYPT_FAILED",
                message: `credential ${record.id} decrypted to a key whose fingerprint does not match`
              })
            )
      })
    }

    const currentKey = Effect.suspend(() => {
      const key = keyring.keys.get(keyring.currentVersion)
      return key === undefined
        ? Effect.fail(
          new CredentialError({
            code: "CREDENTIAL_MISSING",
            message: "CREDENTIAL_ENCRYPTION_KEY is not configured: user keys cannot be stored"
          })
        )
        : Effect.succeed(key)
    })

    /** Encrypts and stores the user's key; the user's previous active key of that provider is revoked. */
    const store = (request: {
      readonly userId: string
      readonly apiKey: Redacted.Redacted<string>
      readonly provider?: string | undefined
    }): Effect.Effect<CredentialSummary, CredentialError | PersistenceError> =>
      Effect.gen(function*() {
        const plain = Redacted.value(request.apiKey)
        if (plain.trim().length === 0 || plain.length > 512 || /\s/.test(plain)) {
          return yield* new CredentialError({
            code: "CREDENTIAL_INVALID",
            message: "the key is empty, too long or contains whitespace"
          })
        }
        const key = yield* currentKey
        const id = yield* newId
        const provider = request.provider ?? defaultProvider
        const row = { id, userId: request.userId, provider }
        const ciphertext = encryptKey(request.apiKey, key, keyring.currentVersion, row)
        const record = yield* repository.insertReplacingActive({
          ...row,
          ...ciphertext,
          keyFingerprint: fingerprintOf(request.apiKey)
        })
        yield* Effect.logInfo("user credential stored").pipe(
          Effect.annotateLogs({
            credentialId: id,
            userId: request.userId,
            provider,
            keyVersion: keyring.currentVersion
          })
        )
        return summaryOf(record)
      })

    const notFound = (credentialId: string | null, why: string) =>
      new CredentialError({ code: "CREDENTIAL_NOT_FOUND", message: `credential ${credentialId ?? "<none>"} ${why}` })

    /**
     * RESOLVE: CREDENTIAL_MISSING when the default provider has no platform key; a user key must
     * belong to `userId` and not be revoked, or it is CREDENTIAL_NOT_FOUND.
     */
    const resolve = (request: {
      readonly mode: CredentialMode
      readonly credentialId: string | null
      readonly userId: string
    }): Effect.Effect<JobCredentials, CredentialError | PersistenceError> =>
      Effect.gen(function*() {
        if (request.mode === "platform_key") {
          const keyOf = (provider: string) =>
            Option.map(
              Option.fromNullable(platformKeys.get(provider)),
              (apiKey): ResolvedCredential => ({ mode: "platform_key", credentialId: null, provider, apiKey })
            )
          const home = keyOf(platformProvider)
          if (Option.isNone(home)) {
            return yield* new CredentialError({ code: "CREDENTIAL_MISSING", message: "AI_API_KEY is not configured" })
          }
          return { ...home.value, forProvider: keyOf } satisfies JobCredentials
        }
        const credentialId = request.credentialId
        if (credentialId === null) return yield* notFound(null, "is not set on the job")
        const found = yield* repository.findById(credentialId)
        if (Option.isNone(found) || found.value.userId !== request.userId) {
          return yield* notFound(credentialId, "does not exist for this user")
        }
        if (found.value.revokedAt !== null) return yield* notFound(credentialId, "was revoked")
        const apiKey = yield* decrypt(found.value)
        const own: ResolvedCredential = {
          mode: "user_deepseek_key",
          credentialId,
          provider: found.value.provider,
          apiKey
        }
        return {
          ...own,
          forProvider: (provider) => (provider === own.provider ? Option.some(own) : Option.none())
        } satisfies JobCredentials
      })

    /** Re-encrypts up to `limit` credentials stored under an older key version; returns how many. */
    const rotate = (limit: number): Effect.Effect<number, CredentialError | PersistenceError> =>
      Effect.gen(function*() {
        const key = yield* currentKey
        const stale = yield* repository.listStale(keyring.currentVersion, limit)
        let rotated = 0
        for (const record of stale) {
          const plain = yield* Effect.either(decrypt(record))
          if (Either.isLeft(plain)) {
            yield* Effect.logWarning("credential cannot be re-encrypted").pipe(
              Effect.annotateLogs({ credentialId: record.id, keyVersion: record.keyVersion, code: plain.left.code })
            )
            continue
          }
          const ciphertext = encryptKey(plain.right, key, keyring.currentVersion, record)
          if (yield* repository.reencrypt(record.id, record.keyVersion, ciphertext)) rotated++
        }
        return rotated
      })

    return {
      store,
      /** `CREDENTIAL_NOT_FOUND` unless the credential is the user's and active. */
      revoke: ({ credentialId, userId }: { readonly userId: string; readonly credentialId: string }): Effect.Effect<
        void,
        CredentialError | PersistenceError
      > =>
        repository.revoke(credentialId, userId).pipe(
          Effect.flatMap((revoked) =>
            revoked
              ? Effect.logInfo("user credential revoked").pipe(Effect.annotateLogs({ credentialId, userId }))
              : Effect.fail(notFound(credentialId, "is not an active credential of this user"))
          )
        ),
      /** The id a new `user_deepseek_key` job stores in `ai_job.credential_id`. */
      activeCredentialId: (
        userId: string,
        provider?: string | undefined
      ): Effect.Effect<Option.Option<string>, PersistenceError> =>
        repository.findActive(userId, provider ?? defaultProvider).pipe(Effect.map(Option.map((record) => record.id))),
      list: (userId: string): Effect.Effect<ReadonlyArray<CredentialSummary>, PersistenceError> =>
        repository.listByUser(userId).pipe(Effect.map((records) => records.map(summaryOf))),
      resolve,
      rotate
    }
  })

/**
 * The spec's CredentialEncryptionService (docs/architecture.md §14.1). A platform key comes from
 * configuration and is never stored; a user key is stored AES-256-GCM encrypted and `ai_job` holds
 * only its id. A key that cannot be decrypted (wrong key, retired key version, tampered row) is
 * `CREDENTIAL_DECRYPT_FAILED`, never garbage. Both layers need a `CredentialRepository`.
 */
export class CredentialVault extends Effect.Service<CredentialVault>()("ai-job-engine/CredentialVault", {
  effect: Effect.gen(function*() {
    const provider = yield* ProviderConfig
    const providers = yield* ProviderSettings
    const ring = yield* CredentialKeyringSettings
    const keyring = makeKeyring(
      Option.map(provider.credentialEncryptionKey, (key) => ({ version: ring.currentVersion, key })),
      ring.previous.map(([version, buffer]) => [version, Redacted.make(buffer.toString("base64"))] as const)
    )
    const platformKeys = new Map(
      [...providers.providers.values()].flatMap((endpoint) =>
        Option.toArray(Option.map(endpoint.apiKey, (key) => [endpoint.name, key] as const))
      )
    )
    return yield* makeCredentialVault({
      keyring,
      platformKey: Option.none(),
      platformKeys,
      platformProvider: providers.defaultProvider
    })
  }),
  dependencies: [ProviderSettings.layer, CredentialKeyringSettings.layer]
}) {
  static readonly withOptions = (
    options: CredentialVaultOptions
  ): Layer.Layer<CredentialVault, never, CredentialRepository> =>
    Layer.effect(CredentialVault, Effect.map(makeCredentialVault(options), CredentialVault.make))
}
