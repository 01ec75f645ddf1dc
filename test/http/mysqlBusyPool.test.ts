import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Redacted, Schedule, Schema } from "effect"
import { mysqlClientLayer } from "../../src/layers/mysql/MysqlDatabase.js"
import { ReadinessProbeLive } from "../../src/main/AppLayers.js"
import { testServerUrl } from "../support/scratchDatabase.js"
import { routeThroughProxy, type TcpProxy } from "../support/tcpProxy.js"
import { apiLayer, bodyAs, ErrorBody, flashcardBody, TestApi, tokenFor } from "./support/harness.js"
import { mysqlEngine } from "./support/mysqlEngine.js"

/**
 * Issue 18, defect 5: readiness never refuses work because the pool was busy, and a database
 * that really stopped still answers 503 (creates and `/readyz`).
 */

const timeout = { timeout: "60 seconds" } as const
const DatabaseName = Schema.Array(Schema.Struct({ name: Schema.String }))
const Count = Schema.Array(Schema.Struct({ n: Schema.Number }))
const poolSize = 20 // what `mysqlRepositories` gives the engine

/** The engine's statements now sleeping on the server, seen from a connection of our own. */
const sleepingIn = (database: string) =>
  Effect.gen(function*() {
    const admin = yield* SqlClient.SqlClient
    const rows =
      yield* admin`SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ${database} AND INFO LIKE 'SELECT SLEEP%'`
    return (yield* Schema.decodeUnknown(Count)(rows))[0]?.n ?? 0
  }).pipe(Effect.provide(mysqlClientLayer(Redacted.make(testServerUrl), { maxConnections: 1 })), Effect.orDie)

layer(apiLayer(mysqlEngine("http_busy_pool"), { probe: ReadinessProbeLive }), {
  excludeTestServices: true,
  ...timeout
})(
  "a busy pool",
  (it) => {
    it.effect("every connection busy for seconds: creates wait and are accepted, /readyz stays 200", () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const sql = yield* SqlClient.SqlClient
        const database = (yield* Schema.decodeUnknown(DatabaseName)(yield* sql`SELECT DATABASE() AS name`))[0]?.name ??
          ""
        const busy = yield* Effect.fork(
          Effect.forEach(Array.from({ length: poolSize }), () => sql`SELECT SLEEP(4)`, {
            concurrency: "unbounded",
            discard: true
          })
        )
        // Every connection the work can have is asleep (one may be readiness's own).
        yield* sleepingIn(database).pipe(
          Effect.repeat({ schedule: Schedule.spaced("20 millis"), until: (n) => n >= poolSize - 1 })
        )
        const token = yield* tokenFor("busy-pool-user")
        const [ready, ...creates] = yield* Effect.all(
          [
            api.request("GET", "/readyz"),
            ...Array.from(
              { length: 3 },
              () => api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() })
            )
          ],
          { concurrency: "unbounded" }
        )
        for (const created of creates) expect(created.status, created.text).toBe(202)
        expect(ready?.status, ready?.text).toBe(200)
        yield* Fiber.join(busy)
      }).pipe(Effect.orDie))
  }
)

/** How the test stops the database: the engine reaches MariaDB only through this proxy. */
const proxied = Effect.runSync(Deferred.make<TcpProxy>())
layer(
  apiLayer(mysqlEngine("http_stopped_db", {}, { route: routeThroughProxy(proxied) }), { probe: ReadinessProbeLive }),
  { excludeTestServices: true, ...timeout }
)("a stopped database", (it) => {
  it.effect("creates are 503 PLATFORM_UNAVAILABLE and /readyz is 503 naming the database", () =>
    Effect.gen(function*() {
      const api = yield* TestApi
      const token = yield* tokenFor("stopped-db-user")
      expect((yield* api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() })).status)
        .toBe(202)
      expect((yield* api.request("GET", "/readyz")).status).toBe(200)

      yield* Effect.flatMap(Deferred.await(proxied), (proxy) => proxy.stop)
      const created = yield* api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() })
      expect(created.status, created.text).toBe(503)
      expect(yield* bodyAs(ErrorBody)(created)).toMatchObject({ code: "PLATFORM_UNAVAILABLE" })
      const ready = yield* api.request("GET", "/readyz")
      expect(ready.status).toBe(503)
      expect(ready.body).toMatchObject({ code: "PLATFORM_UNAVAILABLE", message: "not ready: database does not answer" })
    }))
})
