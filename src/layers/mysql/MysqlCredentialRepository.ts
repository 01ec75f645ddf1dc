import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Layer, Schema } from "effect"
import { PersistenceError } from "../../domain/PersistenceError.js"
import { CredentialRecord, CredentialRepository } from "../../services/CredentialRepository.js"
import { changedRows } from "./rows.js"
import { sqlClock } from "./sqlClock.js"
import { persistence } from "./sqlErrors.js"

/** What `insertReplacingActive` writes: every column but the database clock's and `revoked_at` (NULL). */
const NewCredentialRow = CredentialRecord.pipe(Schema.omit("revokedAt", "createdAt", "updatedAt"))

/** Times are the database's `UTC_TIMESTAMP(3)`, never a worker's clock. */
export const makeMysqlCredentialRepository = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { now } = sqlClock(sql)

  const byId = {
    Request: Schema.String,
    Result: CredentialRecord,
    execute: (id: string) => sql`SELECT * FROM user_model_credential WHERE id = ${id}`
  }
  const findCredential = SqlSchema.findOne(byId)
  const singleCredential = SqlSchema.single(byId)
  const insertCredential = SqlSchema.void({
    Request: NewCredentialRow,
    // The clock columns are the database's expression, which `sql.insert` cannot bind: `INSERT ... SET`.
    execute: (row) =>
      sql`INSERT INTO user_model_credential SET ${
        sql.update(row)
      }, revoked_at = NULL, created_at = ${now}, updated_at = ${now}`
  })
  const findActiveCredential = SqlSchema.findOne({
    Request: Schema.Struct({ userId: Schema.String, provider: Schema.String }),
    Result: CredentialRecord,
    execute: ({ provider, userId }) =>
      sql`
        SELECT * FROM user_model_credential
         WHERE user_id = ${userId} AND provider = ${provider} AND revoked_at IS NULL
         ORDER BY created_at DESC, id DESC
         LIMIT 1`
  })
  const listCredentials = SqlSchema.findAll({
    Request: Schema.String,
    Result: CredentialRecord,
    execute: (userId) =>
      sql`SELECT * FROM user_model_credential WHERE user_id = ${userId} ORDER BY created_at DESC, id DESC`
  })
  const listStaleCredentials = SqlSchema.findAll({
    Request: Schema.Struct({ currentVersion: Schema.Number, limit: Schema.Number }),
    Result: CredentialRecord,
    execute: ({ currentVersion, limit }) =>
      sql`
        SELECT * FROM user_model_credential
         WHERE key_version <> ${currentVersion}
         ORDER BY id
         LIMIT ${limit}`
  })

  return CredentialRepository.of({
    insertReplacingActive: (record) =>
      Effect.gen(function*() {
        yield* sql`
          UPDATE user_model_credential
             SET revoked_at = ${now}, updated_at = ${now}
           WHERE user_id = ${record.userId} AND provider = ${record.provider} AND revoked_at IS NULL`
        yield* insertCredential(record)
      }).pipe(
        sql.withTransaction,
        Effect.zipRight(singleCredential(record.id)),
        Effect.catchTag("NoSuchElementException", () =>
          Effect.fail(
            new PersistenceError({ operation: "credential.insertReplacingActive", message: "inserted row not found" })
          )),
        persistence("credential.insertReplacingActive")
      ),
    findById: (id) => findCredential(id).pipe(persistence("credential.findById")),
    findActive: (userId, provider) =>
      findActiveCredential({ userId, provider }).pipe(persistence("credential.findActive")),
    listByUser: (userId) => listCredentials(userId).pipe(persistence("credential.listByUser")),
    revoke: (id, userId) =>
      changedRows(
        sql`
        UPDATE user_model_credential
           SET revoked_at = ${now}, updated_at = ${now}
         WHERE id = ${id} AND user_id = ${userId} AND revoked_at IS NULL`.raw
      ).pipe(
        persistence("credential.revoke"),
        Effect.map((changed) => changed === 1)
      ),
    reencrypt: (id, expectedKeyVersion, ciphertext) =>
      changedRows(
        sql`
        UPDATE user_model_credential
           SET encrypted_key = ${ciphertext.encryptedKey}, iv = ${ciphertext.iv}, auth_tag = ${ciphertext.authTag},
               key_version = ${ciphertext.keyVersion}, updated_at = ${now}
         WHERE id = ${id} AND key_version = ${expectedKeyVersion}`.raw
      ).pipe(
        persistence("credential.reencrypt"),
        Effect.map((changed) => changed === 1)
      ),
    listStale: (currentVersion, limit) =>
      listStaleCredentials({ currentVersion, limit }).pipe(persistence("credential.listStale"))
  })
})

export const MysqlCredentialRepository = Layer.effect(CredentialRepository, makeMysqlCredentialRepository)
