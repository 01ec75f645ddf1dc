import { SqlClient } from "@effect/sql"
import { Array as Arr, Effect, Layer, ParseResult, Schema } from "effect"
import { PersistenceError } from "../../domain/PersistenceError.js"
import { CredentialRecord, CredentialRepository } from "../../services/CredentialRepository.js"
import { persistence } from "./sqlErrors.js"

const decodeRows = (operation: string) => (rows: ReadonlyArray<unknown>) =>
  Schema.decodeUnknown(Schema.Array(CredentialRecord))(rows).pipe(
    Effect.mapError((error) =>
      // Paths only: a row holds ciphertext, which has no business in an error message.
      new PersistenceError({
        operation,
        message: `row does not decode at ${
          ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => issue.path.join(".")).join(", ")
        }`
      })
    )
  )

const affectedRows = (result: unknown): number =>
  typeof result === "object" && result !== null && "affectedRows" in result && typeof result.affectedRows === "number"
    ? result.affectedRows
    : 0

/** `user_model_credential` in MySQL. Times are the database's `UTC_TIMESTAMP(3)`. */
export const makeMysqlCredentialRepository = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  const findById = (id: string) =>
    sql`SELECT * FROM user_model_credential WHERE id = ${id}`.pipe(
      persistence("credential.findById"),
      Effect.flatMap(decodeRows("credential.findById")),
      Effect.map(Arr.head)
    )

  return CredentialRepository.of({
    insertReplacingActive: (record) =>
      Effect.gen(function* () {
        yield* sql`
          UPDATE user_model_credential
             SET revoked_at = UTC_TIMESTAMP(3), updated_at = UTC_TIMESTAMP(3)
           WHERE user_id = ${record.userId} AND provider = ${record.provider} AND revoked_at IS NULL`
        yield* sql`
          INSERT INTO user_model_credential
            (id, user_id, provider, encrypted_key, iv, auth_tag, key_version, key_fingerprint, revoked_at, created_at, updated_at)
          VALUES
            (${record.id}, ${record.userId}, ${record.provider}, ${record.encryptedKey}, ${record.iv}, ${record.authTag},
             ${record.keyVersion}, ${record.keyFingerprint}, NULL, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`
      }).pipe(
        sql.withTransaction,
        persistence("credential.insertReplacingActive"),
        Effect.zipRight(findById(record.id)),
        Effect.flatMap((row) =>
          row._tag === "Some"
            ? Effect.succeed(row.value)
            : Effect.fail(new PersistenceError({ operation: "credential.insertReplacingActive", message: "inserted row not found" }))
        )
      ),
    findById,
    findActive: (userId, provider) =>
      sql`
        SELECT * FROM user_model_credential
         WHERE user_id = ${userId} AND provider = ${provider} AND revoked_at IS NULL
         ORDER BY created_at DESC, id DESC
         LIMIT 1`.pipe(persistence("credential.findActive"), Effect.flatMap(decodeRows("credential.findActive")), Effect.map(Arr.head)),
    listByUser: (userId) =>
      sql`SELECT * FROM user_model_credential WHERE user_id = ${userId} ORDER BY created_at DESC, id DESC`.pipe(
        persistence("credential.listByUser"),
        Effect.flatMap(decodeRows("credential.listByUser"))
      ),
    revoke: (id, userId) =>
      sql`
        UPDATE user_model_credential
           SET revoked_at = UTC_TIMESTAMP(3), updated_at = UTC_TIMESTAMP(3)
         WHERE id = ${id} AND user_id = ${userId} AND revoked_at IS NULL`.raw.pipe(
        persistence("credential.revoke"),
        Effect.map((result) => affectedRows(result) === 1)
      ),
    reencrypt: (id, expectedKeyVersion, ciphertext) =>
      sql`
        UPDATE user_model_credential
           SET encrypted_key = ${ciphertext.encryptedKey}, iv = ${ciphertext.iv}, auth_tag = ${ciphertext.authTag},
               key_version = ${ciphertext.keyVersion}, updated_at = UTC_TIMESTAMP(3)
         WHERE id = ${id} AND key_version = ${expectedKeyVersion}`.raw.pipe(
        persistence("credential.reencrypt"),
        Effect.map((result) => affectedRows(result) === 1)
      ),
    listStale: (currentVersion, limit) =>
      sql`
        SELECT * FROM user_model_credential
         WHERE key_version <> ${currentVersion}
         ORDER BY id
         LIMIT ${limit}`.pipe(persistence("credential.listStale"), Effect.flatMap(decodeRows("credential.listStale")))
  })
})

export const MysqlCredentialRepository = Layer.effect(CredentialRepository, makeMysqlCredentialRepository)
