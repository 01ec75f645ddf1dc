import { Context, type Effect, type Option, type Redacted } from "effect"
import type { CredentialMode } from "../domain/CredentialMode.js"
import type { CredentialError } from "../domain/ExecutionError.js"
import type { PersistenceError } from "../domain/PersistenceError.js"
import type { ResolvedCredential } from "./AiGateway.js"

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
 * ADR 8.1 CredentialEncryptionService. `platform_key` is `AI_API_KEY` (never stored);
 * `user_deepseek_key` is stored AES-256-GCM encrypted in `user_model_credential`, and `ai_job`
 * holds only its id. A key that cannot be decrypted (wrong key, rotated-away key version,
 * tampered row) is `CREDENTIAL_DECRYPT_FAILED`, never garbage.
 */
export class CredentialVault extends Context.Tag("ai-job-engine/CredentialVault")<
  CredentialVault,
  {
    /** Encrypts and stores the user's key; the user's previous active key of that provider is revoked. */
    readonly store: (request: {
      readonly userId: string
      readonly apiKey: Redacted.Redacted<string>
      readonly provider?: string | undefined
    }) => Effect.Effect<CredentialSummary, CredentialError | PersistenceError>
    /** `CREDENTIAL_NOT_FOUND` unless the credential is the user's and active. */
    readonly revoke: (request: { readonly userId: string; readonly credentialId: string }) => Effect.Effect<void, CredentialError | PersistenceError>
    /** The id a new `user_deepseek_key` job stores in `ai_job.credential_id`. */
    readonly activeCredentialId: (userId: string, provider?: string | undefined) => Effect.Effect<Option.Option<string>, PersistenceError>
    readonly list: (userId: string) => Effect.Effect<ReadonlyArray<CredentialSummary>, PersistenceError>
    /**
     * RESOLVE: the key that pays for a job. `platform_key` → `AI_API_KEY` (CREDENTIAL_MISSING when
     * unset); `user_deepseek_key` → the decrypted credential `credentialId`, which must belong to
     * `userId` and not be revoked (CREDENTIAL_NOT_FOUND otherwise).
     */
    readonly resolve: (request: {
      readonly mode: CredentialMode
      readonly credentialId: string | null
      readonly userId: string
    }) => Effect.Effect<ResolvedCredential, CredentialError | PersistenceError>
    /** Re-encrypts up to `limit` credentials stored under an older key version; returns how many. */
    readonly rotate: (limit: number) => Effect.Effect<number, CredentialError | PersistenceError>
  }
>() {}
