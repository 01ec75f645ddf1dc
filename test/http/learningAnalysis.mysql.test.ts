import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Logger, LogLevel, Schedule, Schema } from "effect"
import { memoryEngineStack, startEngine } from "../support/engineStack.js"
import { mysqlRedisInfrastructure } from "../support/liveInfrastructure.js"
import { bodyAs, feynmanBody, JobBody, startApi, type TestResponse, tokenFor } from "./support/harness.js"

const ArtifactsBody = Schema.Struct({
  lifecycleStatus: Schema.String,
  artifacts: Schema.Array(Schema.Struct({ artifactType: Schema.String, artifactId: Schema.String })),
  records: Schema.Array(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})
const EvaluationRecord = Schema.Struct({
  id: Schema.String,
  concept: Schema.String,
  score: Schema.Number,
  gaps: Schema.Array(Schema.String)
})

/** A JSON list column: parsed by the driver, or text where the server reports it as LONGTEXT. */
const JsonList = Schema.Union(Schema.Array(Schema.String), Schema.parseJson(Schema.Array(Schema.String)))

/** The stored row as an operator's SQL reads it. */
const AnalysisRow = Schema.Struct({
  job_id: Schema.String,
  user_id: Schema.String,
  evaluation_ids: JsonList,
  strengths: JsonList,
  gaps: JsonList,
  next_steps: JsonList
})

describe("learning_analysis end to end (API, engine on MySQL + Redis, synthetic provider)", () => {
  it.live(
    "evaluations run, their artifacts go into an analysis, and the analysis lands in the learning_analysis table",
    () =>
      Effect.scoped(
        Effect.gen(function*() {
          const engine = yield* Layer.build(
            memoryEngineStack({ infrastructure: mysqlRedisInfrastructure("http_learning_analysis") })
          )
          const api = yield* startApi(Layer.succeedContext(engine))
          yield* Effect.provide(startEngine(), engine)
          const token = yield* tokenFor("mysql-learner")

          // Waits on the job's own status (the queue and worker are real): polled, bounded.
          const finished = (jobId: string) =>
            api.request("GET", `/api/ai/jobs/${jobId}/artifacts`, { token }).pipe(
              Effect.flatMap(bodyAs(ArtifactsBody)),
              Effect.filterOrFail(
                (body) => ["succeeded", "failed", "cancelled"].includes(body.lifecycleStatus),
                () => "not finished"
              ),
              Effect.retry(Schedule.spaced("100 millis")),
              Effect.timeout("30 seconds")
            )
          const created = (response: TestResponse) => {
            expect(response.status, response.text).toBe(202)
            return bodyAs(JobBody)(response)
          }

          const concepts = [
            {
              concept: "photosynthesis",
              explanation:
                "Plants use light, for example sunlight on leaves, to turn water and carbon dioxide into glucose and oxygen, which they store and breathe out."
            },
            { concept: "cellular respiration", explanation: "Cells burn food." }
          ]
          const evaluations = []
          for (const body of concepts) {
            const job = yield* created(
              yield* api.request("POST", "/api/ai/feynman-evaluations", { token, body: feynmanBody(body) })
            )
            const done = yield* finished(job.jobId)
            expect(done.lifecycleStatus).toBe("succeeded")
            const record = yield* Schema.decodeUnknown(EvaluationRecord)(done.records[0])
            evaluations.push({
              evaluationId: record.id,
              concept: record.concept,
              score: record.score,
              gaps: record.gaps
            })
          }

          const analysis = yield* created(
            yield* api.request("POST", "/api/ai/learning-analyses", { token, body: { evaluations } })
          )
          const done = yield* finished(analysis.jobId)
          expect(done.lifecycleStatus).toBe("succeeded")
          expect(done.artifacts.map((artifact) => artifact.artifactType)).toEqual(["learning_analysis"])

          // The infrastructure's SqlClient is in the built context, though not in the stack's type.
          const sql = Context.unsafeGet(engine, SqlClient.SqlClient)
          const rows = yield* sql.unsafe(
            `SELECT CAST(job_id AS CHAR) AS job_id, CAST(user_id AS CHAR) AS user_id, evaluation_ids, strengths, gaps, next_steps
                        FROM learning_analysis WHERE job_id = ?`,
            [analysis.jobId]
          ).withoutTransform
          const [row] = yield* Schema.decodeUnknown(Schema.Array(AnalysisRow))(rows)
          expect(rows).toHaveLength(1)
          expect(row).toMatchObject({
            job_id: analysis.jobId,
            user_id: "mysql-learner",
            evaluation_ids: evaluations.map((e) => e.evaluationId)
          })
          // The weaker evaluation's gaps are the analysis's gaps, and its concept comes first in the plan.
          const weakest = [...evaluations].sort((a, b) => a.score - b.score)[0]!
          expect(row?.gaps).toEqual(expect.arrayContaining(weakest.gaps.slice(0, 1)))
          expect(row?.next_steps[0]).toContain(weakest.concept)
          expect(done.records).toEqual([
            expect.objectContaining({ id: done.artifacts[0]?.artifactId, nextSteps: row?.next_steps })
          ])
        })
      ).pipe(Logger.withMinimumLogLevel(LogLevel.None)),
    90_000
  )
})
