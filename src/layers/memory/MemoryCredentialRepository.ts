import { Effect, Either, HashMap, Layer, Option } from "effect"
import { type CredentialRecord, CredentialRepository } from "../../services/CredentialRepository.js"
import { MemoryDatabase } from "./MemoryDatabase.js"

const newestFirst = (a: CredentialRecord, b: CredentialRecord) =>
  b.createdAt.getTime() - a.createdAt.getTime() || b.id.localeCompare(a.id)

export const makeMemoryCredentialRepository = Effect.gen(function*() {
  const db = yield* MemoryDatabase
  const all = (tables: { readonly userModelCredential: HashMap.HashMap<string, CredentialRecord> }) =>
    Array.from(HashMap.values(tables.userModelCredential))

  return CredentialRepository.of({
    insertReplacingActive: (record) =>
      db.write("credential.insertReplacingActive", (tables, now) => {
        let credentials = tables.userModelCredential
        for (const row of all(tables)) {
          if (row.userId === record.userId && row.provider === record.provider && row.revokedAt === null) {
            credentials = HashMap.set(credentials, row.id, { ...row, revokedAt: now, updatedAt: now })
          }
        }
        const inserted: CredentialRecord = { ...record, revokedAt: null, createdAt: now, updatedAt: now }
        credentials = HashMap.set(credentials, inserted.id, inserted)
        return Either.right([inserted, { ...tables, userModelCredential: credentials }] as const)
      }),
    findById: (id) => db.read((tables) => HashMap.get(tables.userModelCredential, id)),
    findActive: (userId, provider) =>
      db.read((tables) =>
        Option.fromNullable(
          all(tables)
            .filter((row) => row.userId === userId && row.provider === provider && row.revokedAt === null)
            .sort(newestFirst)[0]
        )
      ),
    listByUser: (userId) => db.read((tables) => all(tables).filter((row) => row.userId === userId).sort(newestFirst)),
    revoke: (id, userId) =>
      db.write("credential.revoke", (tables, now) => {
        const row = HashMap.get(tables.userModelCredential, id)
        if (Option.isNone(row) || row.value.userId !== userId || row.value.revokedAt !== null) {
          return Either.right([false, tables] as const)
        }
        const revoked: CredentialRecord = { ...row.value, revokedAt: now, updatedAt: now }
        return Either.right(
          [true, { ...tables, userModelCredential: HashMap.set(tables.userModelCredential, id, revoked) }] as const
        )
      }),
    reencrypt: (id, expectedKeyVersion, ciphertext) =>
      db.write("credential.reencrypt", (tables, now) => {
        const row = HashMap.get(tables.userModelCredential, id)
        if (Option.isNone(row) || row.value.keyVersion !== expectedKeyVersion) {
          return Either.right([false, tables] as const)
        }
        const updated: CredentialRecord = {
          ...row.value,
          encryptedKey: ciphertext.encryptedKey,
          iv: ciphertext.iv,
          authTag: ciphertext.authTag,
          keyVersion: ciphertext.keyVersion,
          updatedAt: now
        }
        return Either.right(
          [true, { ...tables, userModelCredential: HashMap.set(tables.userModelCredential, id, updated) }] as const
        )
      }),
    listStale: (currentVersion, limit) =>
      db.read((tables) =>
        all(tables)
          .filter((row) => row.keyVersion !== currentVersion)
          .sort((a, b) => a.id.localeCompare(b.id))
          .slice(0, limit)
      )
  })
})

export const MemoryCredentialRepository = Layer.effect(CredentialRepository, makeMemoryCredentialRepository)
