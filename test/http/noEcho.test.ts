import { describe, expect, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import { hasValueFreeErrors } from "../../src/domain/ValueFreeMessages.js"
import { AiJobApi } from "../../src/http/Api.js"
import { LogCapture, LogCaptureLayer } from "../support/logCapture.js"
import {
  bodyAs,
  feynmanBody,
  flashcardBody,
  JobBody,
  learningAnalysisBody,
  type RequestOptions,
  runtimeToken,
  startApi,
  tokenFor
} from "./support/harness.js"
import { mysqlEngine } from "./support/mysqlEngine.js"

/**
 * Nothing a client sends comes back in an answer or reaches a log: a canary string is planted
 * in every field of every route (body, path, query, headers, Authorization), in values that are
 * refused and in values that are accepted, and every answer and log line is searched for it.
 */

/** No hex or base64 run long enough to be scrubbed as a token: the canary must survive to be found. */
const CANARY = "c4n4ry-Zq9"
/** Longer than any field allows. */
const longCanary = CANARY.repeat(60)
/** Longer than an id may be (64), short enough for the router (100). */
const longIdCanary = CANARY.repeat(7)

interface Probe extends RequestOptions {
  readonly method: string
  readonly path: string
  /** Whose token to send: a user, an operator or the runtime service. */
  readonly as: "user" | "admin" | "runtime"
}

const probes = (jobId: string, credentialId: string): ReadonlyArray<Probe> => {
  const user = (probe: Omit<Probe, "as">): Probe => ({ ...probe, as: "user" })
  const admin = (probe: Omit<Probe, "as">): Probe => ({ ...probe, as: "admin" })
  const runtime = (probe: Omit<Probe, "as">): Probe => ({ ...probe, as: "runtime" })
  const flashcards = "/api/ai/flashcard-generations"
  const feynman = "/api/ai/feynman-evaluations"
  const analyses = "/api/ai/learning-analyses"
  const canaryParam = encodeURIComponent(CANARY)
  return [
    // Bodies: every field refused, an unknown field, and accepted values carrying the canary.
    user({
      method: "POST",
      path: flashcards,
      body: { sourceText: longCanary.repeat(40), count: CANARY, deckId: longCanary }
    }),
    user({ method: "POST", path: flashcards, body: flashcardBody({ count: 0, [CANARY]: CANARY, extra: CANARY }) }),
    user({ method: "POST", path: flashcards, body: CANARY }),
    user({ method: "POST", path: flashcards, rawBody: `{"sourceText": "${CANARY}` }),
    user({ method: "POST", path: flashcards, body: flashcardBody({ sourceText: CANARY, deckId: CANARY }) }),
    user({ method: "POST", path: flashcards, body: flashcardBody(), headers: { "Idempotency-Key": longCanary } }),
    user({ method: "POST", path: flashcards, body: flashcardBody(), headers: { "Idempotency-Key": CANARY } }),
    user({ method: "POST", path: feynman, body: { concept: longCanary, explanation: 42 } }),
    user({ method: "POST", path: feynman, body: { concept: CANARY, explanation: [CANARY] } }),
    user({ method: "POST", path: feynman, body: feynmanBody({ concept: CANARY, explanation: CANARY }) }),
    user({ method: "POST", path: feynman, body: feynmanBody(), headers: { "Idempotency-Key": longCanary } }),
    user({
      method: "POST",
      path: analyses,
      body: { evaluations: [{ evaluationId: longCanary, concept: longCanary.repeat(4), score: CANARY, gaps: CANARY }] }
    }),
    user({
      method: "POST",
      path: analyses,
      body: { evaluations: [{ ...learningAnalysisBody().evaluations[0], [CANARY]: CANARY }] }
    }),
    user({
      method: "POST",
      path: analyses,
      body: { evaluations: [{ evaluationId: CANARY, concept: CANARY, score: 50, gaps: [CANARY] }] }
    }),
    // Batches: a bad item among good ones, an unknown field beside the items, and accepted items carrying the canary.
    user({
      method: "POST",
      path: `${flashcards}/batch`,
      body: { items: [flashcardBody(), { sourceText: longCanary.repeat(40), count: CANARY }] }
    }),
    user({ method: "POST", path: `${flashcards}/batch`, body: { items: [flashcardBody()], [CANARY]: CANARY } }),
    user({ method: "POST", path: `${flashcards}/batch`, body: { items: CANARY } }),
    user({
      method: "POST",
      path: `${feynman}/batch`,
      body: { items: [feynmanBody({ concept: CANARY, explanation: CANARY })] }
    }),
    user({
      method: "POST",
      path: `${analyses}/batch`,
      body: { items: [{ evaluations: [{ evaluationId: longCanary, concept: CANARY, score: CANARY, gaps: CANARY }] }] }
    }),
    // Query parameters.
    user({ method: "GET", path: `/api/ai/jobs?status=${canaryParam}&cursor=${canaryParam}&limit=${canaryParam}` }),
    user({
      method: "GET",
      path: `/api/ai/jobs?cursor=${
        Buffer.from(JSON.stringify({ createdAt: CANARY, id: CANARY })).toString("base64url")
      }`
    }),
    user({ method: "GET", path: `/api/ai/jobs?limit=1&${canaryParam}=${canaryParam}` }),
    admin({
      method: "GET",
      path: `/admin-api/ai/outbox/events?status=${canaryParam}&cursor=${canaryParam}&limit=${canaryParam}`
    }),
    admin({ method: "GET", path: "/admin-api/ai/stats", headers: { "x-canary": CANARY } }),
    admin({ method: "POST", path: "/admin-api/ai/outbox/replay-dead", headers: { "x-canary": CANARY } }),
    // Path parameters: too long, and well-formed but unknown.
    ...[longIdCanary, CANARY].flatMap((id) => [
      user({ method: "GET", path: `/api/ai/jobs/${id}` }),
      user({ method: "GET", path: `/api/ai/jobs/${id}/artifacts` }),
      user({ method: "POST", path: `/api/ai/jobs/${id}/cancel` }),
      admin({ method: "GET", path: `/admin-api/ai/jobs/${id}` }),
      admin({ method: "POST", path: `/admin-api/ai/jobs/${id}/retry` }),
      admin({ method: "POST", path: `/admin-api/ai/outbox/${id}/replay` }),
      admin({ method: "GET", path: `/admin-api/ai/jobs/${id}/timeline` }),
      runtime({ method: "POST", path: `/internal/credentials/${id}/resolve`, body: { jobId: jobId } }),
      runtime({ method: "POST", path: `/internal/credentials/${credentialId}/resolve`, body: { jobId: id } })
    ]),
    runtime({
      method: "POST",
      path: `/internal/credentials/${credentialId}/resolve`,
      body: { jobId, [CANARY]: CANARY }
    }),
    runtime({ method: "POST", path: `/internal/credentials/${credentialId}/resolve`, body: { jobId: [CANARY] } }),
    // Credentials: a refused key (too long, whitespace, wrong type) and an accepted one.
    user({ method: "PUT", path: "/api/ai/credentials/deepseek", body: { apiKey: longCanary } }),
    user({ method: "PUT", path: "/api/ai/credentials/deepseek", body: { apiKey: `${CANARY} ${CANARY}` } }),
    user({ method: "PUT", path: "/api/ai/credentials/deepseek", body: { apiKey: { CANARY } } }),
    user({ method: "PUT", path: "/api/ai/credentials/deepseek", body: { apiKey: `sk-${CANARY}` } }),
    user({ method: "DELETE", path: "/api/ai/credentials/deepseek", headers: { "x-canary": CANARY } }),
    // Operator queries.
    admin({
      method: "GET",
      path:
        `/admin-api/ai/jobs?jobType=${encodeURIComponent(longCanary)}&status=${canaryParam}&queueName=${canaryParam}` +
        `&createdFrom=${canaryParam}&createdTo=${canaryParam}&cursor=${canaryParam}&limit=${canaryParam}`
    }),
    admin({ method: "GET", path: `/admin-api/ai/jobs?jobType=${canaryParam}` }),
    admin({ method: "GET", path: `/admin-api/ai/outbox?${canaryParam}=1` }),
    admin({ method: "GET", path: `/admin-api/ai/workers?x=${canaryParam}` }),
    // Routes without input, and no route at all.
    user({ method: "GET", path: `/healthz?x=${canaryParam}` }),
    user({ method: "GET", path: `/readyz?x=${canaryParam}` }),
    user({ method: "GET", path: `/api/ai/${CANARY}` })
  ]
}

/** The method and path template of every route a probe above reaches, checked against the API. */
const probedRoutes = [
  "POST /api/ai/flashcard-generations",
  "POST /api/ai/feynman-evaluations",
  "POST /api/ai/learning-analyses",
  "POST /api/ai/flashcard-generations/batch",
  "POST /api/ai/feynman-evaluations/batch",
  "POST /api/ai/learning-analyses/batch",
  "GET /api/ai/jobs",
  "GET /api/ai/jobs/:jobId",
  "GET /api/ai/jobs/:jobId/artifacts",
  "GET /api/ai/jobs/:jobId/events",
  "POST /api/ai/jobs/:jobId/cancel",
  "PUT /api/ai/credentials/deepseek",
  "DELETE /api/ai/credentials/deepseek",
  "GET /admin-api/ai/jobs",
  "GET /admin-api/ai/jobs/:jobId",
  "POST /admin-api/ai/jobs/:jobId/retry",
  "GET /admin-api/ai/outbox",
  "POST /admin-api/ai/outbox/:eventId/replay",
  "GET /admin-api/ai/workers",
  "GET /admin-api/ai/outbox/events",
  "POST /admin-api/ai/outbox/replay-dead",
  "GET /admin-api/ai/jobs/:jobId/timeline",
  "GET /admin-api/ai/stats",
  "POST /internal/credentials/:credentialId/resolve",
  "GET /healthz",
  "GET /readyz"
]

const endpoints = Object.values(AiJobApi.groups).flatMap((group) => Object.values(group.endpoints))

describe("no echo", () => {
  it("the probes cover every route, and every request schema builds value-free messages", () => {
    expect(endpoints.map((endpoint) => `${endpoint.method} ${endpoint.path}`).sort()).toEqual([...probedRoutes].sort())
    for (const endpoint of endpoints) {
      for (
        const schema of [endpoint.pathSchema, endpoint.urlParamsSchema, endpoint.headersSchema, endpoint.payloadSchema]
      ) {
        if (Option.isSome(schema) && Schema.isSchema(schema.value)) {
          expect(hasValueFreeErrors(schema.value.ast), `${endpoint.method} ${endpoint.path}`).toBe(true)
        }
      }
    }
  })

  it.live("a canary in every field of every route is in no answer and no log line", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(mysqlEngine("no_echo"))
        const userToken = yield* tokenFor("no-echo-user")
        const adminToken = yield* tokenFor("no-echo-admin", "SUPER_ADMIN")
        const tokens = { user: userToken, admin: adminToken, runtime: runtimeToken }
        const job = yield* bodyAs(JobBody)(
          yield* api.request("POST", "/api/ai/flashcard-generations", { token: userToken, body: flashcardBody() })
        )
        const answers: Array<{ readonly probe: string; readonly status: number; readonly text: string }> = []
        const send = (probe: Probe, options: RequestOptions) =>
          Effect.map(api.request(probe.method, probe.path, options), (response) => {
            answers.push({
              probe: `${probe.method} ${probe.path.slice(0, 80)}`,
              status: response.status,
              text: response.text
            })
          })
        for (const probe of probes(job.jobId, "00000000-0000-7000-8000-000000000000")) {
          const { as, method: _method, path: _path, ...options } = probe
          yield* send(probe, { ...options, token: tokens[as] })
          // The same request with the canary as the credentials instead of a token.
          yield* send(probe, { ...options, authorization: `Bearer ${CANARY}` })
        }
        yield* send({ method: "GET", path: "/api/ai/jobs", as: "user" }, { authorization: `Basic ${CANARY}` })

        // The probes were refused for the reasons meant, not all by one early gate.
        const statuses = new Set(answers.map((answer) => answer.status))
        for (const status of [200, 202, 400, 401, 404]) {
          expect(statuses, JSON.stringify([...statuses])).toContain(status)
        }
        expect(answers.filter((answer) => answer.status === 400).length).toBeGreaterThan(20)
        for (const answer of answers) {
          expect(answer.status, answer.probe).toBeLessThan(500)
          expect(
            answer.text.includes(CANARY),
            `${answer.probe} answered ${answer.status}: ${answer.text.slice(0, 300)}`
          ).toBe(false)
        }
        const lines = yield* Effect.flatMap(LogCapture, (capture) => capture.lines)
        expect(lines.length).toBeGreaterThan(0)
        for (const line of lines) expect(line.includes(CANARY), line.slice(0, 300)).toBe(false)
      }).pipe(Effect.provide(LogCaptureLayer))
    ), { timeout: 60_000 })
})
