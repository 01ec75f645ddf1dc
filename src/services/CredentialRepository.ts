import { Context, type Effect, type Option, Schema } from "effect"
import type { PersistenceError } from "../domain/PersistenceError.js"

/** One row of `user_model_credential`, camelCased; also the memory store's `CredentialRow`. */
export const CredentialRecord = Schema.Struct({
  id: Schema.String,
  userId: Schema.String,
  provider: Schema.String,
  /** base64 AES-256-GCM ciphertext of the key; never the key. */
  encryptedKey: Schema.String,
  /** base64 12-byte GCM nonce. */
  iv: Schema.String,
  /** base64 16-byte GCM tag. */
  authTag: Schema.String,
  keyVersion: Schema.Number,
  /** SHA-256 hex of the plain key: lets a user recognise a key without it being readable. */
  keyFingerprint: Schema.String,
  revokedAt: Schema.NullOr(Schema.DateFromSelf),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
export type CredentialRecord = typeof CredentialRecord.Type

export type NewCredentialRecord = Omit<CredentialRecord, "revokedAt" | "createdAt" | "updatedAt">

export interface CredentialCiphertext {
  readonly encryptedKey: string
  readonly iv: string
  readonly authTag: string
  readonly keyVersion: number
}

/** `user_model_credential` storage. Time is the store's clock. */
export class CredentialRepository extends Context.Tag("ai-job-engine/CredentialRepository")<
  CredentialRepository,
  {
    /**
     * Inserts a credential and revokes every other active one of the same user and provider,
     * atomically: a user has at most one active key per provider.
     */
    readonly insertReplacingActive: (record: NewCredentialRecord) => Effect.Effect<CredentialRecord, PersistenceError>
    readonly findById: (id: string) => Effect.Effect<Option.Option<CredentialRecord>, PersistenceError>
    /** The newest non-revoked credential of the user for the provider. */
    readonly findActive: (
      userId: string,
      provider: string
    ) => Effect.Effect<Option.Option<CredentialRecord>, PersistenceError>
    /** Newest first, revoked ones included. */
    readonly listByUser: (userId: string) => Effect.Effect<ReadonlyArray<CredentialRecord>, PersistenceError>
    /** Sets `revoked_at` if the credential belongs to the user and is active; false otherwise. */
    readonly revoke: (id: string, userId: string) => Effect.Effect<boolean, PersistenceError>
    /** Key rotation: replaces the ciphertext if the row is still under `expectedKeyVersion`. */
    readonly reencrypt: (
      id: string,
      expectedKeyVersion: number,
      ciphertext: CredentialCiphertext
    ) => Effect.Effect<boolean, PersistenceError>
    /** Credentials (revoked ones included) still encrypted under a key version other than `currentVersion`. */
    readonly listStale: (
      currentVersion: number,
      limit: number
    ) => Effect.Effect<ReadonlyArray<CredentialRecord>, PersistenceError>
  }
>() {}
