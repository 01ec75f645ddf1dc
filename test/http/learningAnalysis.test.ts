import { describe, expect, it } from "@effect/vitest"
import { Effect, HashMap, Schema } from "effect"
import { MemoryDatabase } from "../../src/layers/memory/MemoryDatabase.js"
import {
  bodyAs,
  ErrorBody,
  feynmanBody,
  JobBody,
  learningAnalysisBody,
  markSucceeded,
  memoryEngine,
  startApi,
  tokenFor
} from "./support/harness.js"

const path = "/api/ai/learning-analyses"

const ArtifactsBody = Schema.Struct({
  jobId: Schema.String,
  lifecycleStatus: Schema.String,
  artifacts: Schema.Array(
    Schema.Struct({ artifactType: Schema.String, artifactId: Schema.String, ordinal: Schema.Number })
  ),
  records: Schema.Array(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})

/** What a client reads from a feynman_evaluation job's artifacts and sends back as one evaluation. */
const EvaluationRecord = Schema.Struct({
  id: Schema.String,
  concept: Schema.String,
  score: Schema.Number,
  gaps: Schema.Array(Schema.String)
})

const jobCount = Effect.map(Effect.flatMap(MemoryDatabase, (db) => db.snapshot), (tables) => HashMap.size(tables.aiJob))

const setup = Effect.gen(function*() {
  const api = yield* startApi(memoryEngine())
  const user = yield* tokenFor("learner-a")
  const create = (body: unknown, headers?: Record<string, string>, token = user) =>
    api.request("POST", path, { token, body, headers })
  return { api, user, create }
})

describe("POST /api/ai/learning-analyses", () => {
  it.live("answers 202 with a queued learning_analysis job; the same Idempotency-Key answers 200, another body 409", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, create } = yield* setup
        const headers = { "Idempotency-Key": "analysis-1" }
        const first = yield* create(learningAnalysisBody(), headers)
        expect(first.status).toBe(202)
        const job = yield* bodyAs(JobBody)(first)
        expect(job).toMatchObject({
          jobType: "learning_analysis",
          lifecycleStatus: "queued",
          queueName: "ai-background",
          priority: 60
        })

        const again = yield* create(learningAnalysisBody(), headers)
        expect(again.status).toBe(200)
        expect((yield* bodyAs(JobBody)(again)).jobId).toBe(job.jobId)

        const other = yield* create(
          learningAnalysisBody({ evaluations: [{ evaluationId: "eval-9", concept: "osmosis", score: 10, gaps: [] }] }),
          headers
        )
        expect(other.status).toBe(409)
        expect((yield* bodyAs(ErrorBody)(other)).code).toBe("IDEMPOTENCY_KEY_REUSED")
        expect(yield* api.run(jobCount)).toBe(1)
      })
    ))

  it.live("a bad body is 400 INVALID_REQUEST naming the field, never the value; no token is 401; nothing is written", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, create } = yield* setup
        const one = learningAnalysisBody().evaluations[0]!
        const cases: ReadonlyArray<{ readonly body: unknown; readonly field: string }> = [
          { body: { evaluations: [] }, field: "evaluations" },
          { body: {}, field: "evaluations" },
          {
            body: { evaluations: Array.from({ length: 21 }, (_, i) => ({ ...one, evaluationId: `e-${i}` })) },
            field: "evaluations"
          },
          { body: { evaluations: [{ ...one, score: 101 }] }, field: "score" },
          { body: { evaluations: [{ ...one, score: 50.5 }] }, field: "score" },
          { body: { evaluations: [{ ...one, concept: "" }] }, field: "concept" },
          { body: { evaluations: [{ ...one, evaluationId: "x".repeat(37) }] }, field: "evaluationId" },
          { body: { evaluations: [{ ...one, gaps: "CANARY-GAP" }] }, field: "gaps" },
          { body: { evaluations: [{ ...one, feedback: "CANARY-FEEDBACK" }] }, field: "feedback" },
          { body: { ...learningAnalysisBody(), userId: "someone-else" }, field: "userId" }
        ]
        for (const c of cases) {
          const response = yield* create(c.body)
          expect(response.status, JSON.stringify(c.body).slice(0, 80)).toBe(400)
          const error = yield* bodyAs(ErrorBody)(response)
          expect(error.code).toBe("INVALID_REQUEST")
          expect(error.message, response.text).toContain(c.field)
          expect(response.text).not.toContain("CANARY")
        }
        const anonymous = yield* api.request("POST", path, { body: learningAnalysisBody() })
        expect(anonymous.status).toBe(401)
        expect(yield* api.run(jobCount)).toBe(0)
      })
    ))

  it.live("a client analyses its evaluations: feynman artifacts in, the analysis in the new job's artifacts", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, user, create } = yield* setup
        const evaluation = yield* bodyAs(JobBody)(
          yield* api.request("POST", "/api/ai/feynman-evaluations", { token: user, body: feynmanBody() })
        )
        yield* api.run(
          markSucceeded(evaluation.jobId, { score: 45, feedback: "A fair start.", gaps: ["no concrete example"] })
        )
        const evaluationArtifacts = yield* bodyAs(ArtifactsBody)(
          yield* api.request("GET", `/api/ai/jobs/${evaluation.jobId}/artifacts`, { token: user })
        )
        const evaluations = yield* Effect.forEach(
          evaluationArtifacts.records,
          (record) =>
            Effect.map(
              Schema.decodeUnknown(EvaluationRecord)(record),
              ({ concept, gaps, id, score }) => ({ evaluationId: id, concept, score, gaps })
            )
        )
        expect(evaluations).toMatchObject([{ concept: "photosynthesis", score: 45, gaps: ["no concrete example"] }])

        const created = yield* create({ evaluations })
        expect(created.status).toBe(202)
        const job = yield* bodyAs(JobBody)(created)
        const before = yield* bodyAs(ArtifactsBody)(
          yield* api.request("GET", `/api/ai/jobs/${job.jobId}/artifacts`, { token: user })
        )
        expect(before).toMatchObject({ lifecycleStatus: "queued", artifacts: [], records: [] })

        const analysis = {
          summary: "Photosynthesis is half there.",
          strengths: [],
          gaps: ["no concrete example"],
          nextSteps: ["Explain photosynthesis again with an example from a leaf"]
        }
        yield* api.run(markSucceeded(job.jobId, analysis))
        const status = yield* bodyAs(JobBody)(yield* api.request("GET", `/api/ai/jobs/${job.jobId}`, { token: user }))
        expect(status.result?.artifacts.map((a) => a.artifactType)).toEqual(["learning_analysis"])
        const after = yield* bodyAs(ArtifactsBody)(
          yield* api.request("GET", `/api/ai/jobs/${job.jobId}/artifacts`, { token: user })
        )
        expect(after.records).toEqual([{
          id: after.artifacts[0]?.artifactId,
          evaluationIds: [evaluationArtifacts.artifacts[0]?.artifactId],
          ...analysis
        }])

        const stranger = yield* tokenFor("learner-b")
        expect((yield* api.request("GET", `/api/ai/jobs/${job.jobId}/artifacts`, { token: stranger })).status).toBe(404)
      })
    ))
})
