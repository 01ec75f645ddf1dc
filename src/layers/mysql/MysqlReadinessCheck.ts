import { SqlClient } from "@effect/sql"
import { Effect, Resource } from "effect"
import type { ReadinessCheck } from "../../services/ReadinessProbe.js"

/**
 * `SELECT 1` on a connection of its own, taken from the pool once and held: a pool busy with
 * work never makes the database look down. A failed ping takes a fresh connection and tries
 * once more, so a connection the server dropped is not mistaken for a stopped server.
 */
export const mysqlCheck = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const connection = yield* Resource.manual(sql.reserve)
  const selectOne = Effect.flatMap(Resource.get(connection), (conn) => conn.executeRaw("SELECT 1", []))
  return {
    name: "database",
    backend: "mysql",
    ping: selectOne.pipe(
      Effect.catchAll(() => Effect.zipRight(Resource.refresh(connection), selectOne)),
      Effect.asVoid
    ),
    gatesWrites: false
  } satisfies ReadinessCheck
})
