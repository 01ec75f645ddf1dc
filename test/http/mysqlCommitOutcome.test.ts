import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Deferred, Effect, Schema } from "effect"
import { ReadinessProbeLive } from "../../src/main/AppLayers.js"
import { type CommitCut, routeThroughProxy, type TcpProxy } from "../support/tcpProxy.js"
import { apiLayer, bodyAs, ErrorBody, flashcardBody, JobBody, TestApi, tokenFor } from "./support/harness.js"
import { mysqlEngine } from "./support/mysqlEngine.js"

/**
 * Issue 18, defect 4: the connection dies during the create's COMMIT. The API answers 503 with
 * `Retry-After` (never 500), and a retry with the same Idempotency-Key ends with exactly one job:
 * the committed one when the commit happened, a new one when it did not.
 */

const Count = Schema.Array(Schema.Struct({ n: Schema.Number }))
const jobsWithKey = (key: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql`SELECT COUNT(*) AS n FROM ai_job WHERE idempotency_key = ${key}`
    return (yield* Schema.decodeUnknown(Count)(rows))[0]?.n ?? 0
  }).pipe(Effect.orDie)

const proxied = Effect.runSync(Deferred.make<TcpProxy>())

layer(
  apiLayer(mysqlEngine("http_commit_cut", {}, { route: routeThroughProxy(proxied) }), { probe: ReadinessProbeLive }),
  { excludeTestServices: true, timeout: "60 seconds" }
)("a connection lost during the create's COMMIT", (it) => {
  const cases: ReadonlyArray<readonly [CommitCut, string, number]> = [
    ["before", "the server never saw the COMMIT: the retry creates the job (202)", 202],
    ["after", "the server committed but its answer was lost: the retry finds that job (200)", 200]
  ]
  for (const [where, title, retryStatus] of cases) {
    it.effect(`${where}: 503 with Retry-After; ${title}`, () =>
      Effect.gen(function*() {
        const api = yield* TestApi
        const proxy = yield* Deferred.await(proxied)
        const token = yield* tokenFor(`commit-cut-${where}`)
        const key = `commit-cut-${where}-key`
        const create = api.request("POST", "/api/ai/flashcard-generations", {
          token,
          body: flashcardBody(),
          headers: { "idempotency-key": key }
        })

        yield* proxy.cutNextCommit(where)
        const lost = yield* create
        expect(lost.status, lost.text).toBe(503)
        expect(yield* bodyAs(ErrorBody)(lost)).toMatchObject({ code: "PLATFORM_UNAVAILABLE" })
        expect(Number(lost.headers.get("retry-after"))).toBeGreaterThan(0)
        expect(yield* jobsWithKey(key)).toBe(where === "after" ? 1 : 0)

        const retried = yield* create
        expect(retried.status, retried.text).toBe(retryStatus)
        const job = yield* bodyAs(JobBody)(retried)
        expect(yield* jobsWithKey(key)).toBe(1)
        const again = yield* bodyAs(JobBody)(yield* create)
        expect(again.jobId).toBe(job.jobId)
      }))
  }
})
