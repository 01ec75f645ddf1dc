import { describe, expect, layer } from "@effect/vitest"
import { Clock, Effect, type Layer } from "effect"
import { newId } from "../../src/domain/Ids.js"
import { learningAnalysisProjector } from "../../src/jobs/learning_analysis/projector.js"
import { syntheticEchoProjector } from "../../src/jobs/synthetic_echo/projector.js"
import { AiJobService } from "../../src/services/AiJobService.js"
import { ProjectionStore } from "../../src/services/ProjectionStore.js"
import { UnitOfWork } from "../../src/services/UnitOfWork.js"

export interface ProjectionHarness {
  readonly name: string
  readonly layer: Layer.Layer<AiJobService | ProjectionStore | UnitOfWork, unknown>
  readonly liveClock: boolean
}

const echoJob = Effect.gen(function*() {
  const service = yield* AiJobService
  const { job } = yield* service.createJob({
    userId: `projection-${yield* newId}`,
    jobType: "synthetic_echo",
    targetType: "test",
    targetId: "t-1",
    input: { message: "hello" }
  })
  return job
})

const storedRows = (jobId: string) =>
  Effect.flatMap(ProjectionStore, (store) => store.findByJob("synthetic_echo_result", jobId, { orderBy: "id" }))

// The harness registers only synthetic_echo: a stored job, given the analysis's type and input.
const analysisJob = Effect.map(echoJob, (job) => ({
  ...job,
  jobType: "learning_analysis",
  input: {
    evaluations: [
      { evaluationId: "eval-a", concept: "entropy", score: 90, gaps: [] },
      { evaluationId: "eval-b", concept: "enthalpy", score: 35, gaps: ["no concrete example"] }
    ]
  }
}))

const analysis = {
  summary: "Entropy is solid; enthalpy needs work.",
  strengths: ["explains entropy well"],
  gaps: ["no concrete example", "quotes \"and\" commas, too"],
  nextSteps: ["Revisit enthalpy with an example"]
}

/** What both backings must agree on when a job's output becomes business rows. */
export const projectionStoreContract = (harness: ProjectionHarness) =>
  describe(`ProjectionStore contract (${harness.name})`, () => {
    layer(harness.layer, { timeout: 60_000, excludeTestServices: harness.liveClock })((it) => {
      it.effect("the same job projected twice in separate transactions: no error, duplicate, rows unchanged", () =>
        Effect.gen(function*() {
          const unitOfWork = yield* UnitOfWork
          const projector = yield* syntheticEchoProjector
          const job = yield* echoJob
          const first = yield* unitOfWork.transaction(projector.project(job, { echo: "first" }))
          const rowsAfterFirst = yield* storedRows(job.id)
          const second = yield* unitOfWork.transaction(projector.project(job, { echo: "second" }))
          expect(first.duplicate).toBe(false)
          expect(second.duplicate).toBe(true)
          expect(second.artifacts).toStrictEqual(first.artifacts)
          expect(yield* storedRows(job.id)).toStrictEqual(rowsAfterFirst)
          expect(rowsAfterFirst.map((row) => row.echo)).toStrictEqual(["first"])
        }))

      it.effect("a learning analysis: its lists come back as stored, a second projection is a duplicate", () =>
        Effect.gen(function*() {
          const unitOfWork = yield* UnitOfWork
          const projector = yield* learningAnalysisProjector
          const job = yield* analysisJob
          const first = yield* unitOfWork.transaction(projector.project(job, analysis))
          const second = yield* unitOfWork.transaction(
            projector.project(job, { ...analysis, summary: "another answer" })
          )
          expect(first.duplicate).toBe(false)
          expect(second.duplicate).toBe(true)
          expect(first.artifacts.map((artifact) => artifact.artifactType)).toStrictEqual(["learning_analysis"])
          expect(yield* projector.records(job)).toStrictEqual([{
            id: first.artifacts[0]?.artifactId,
            evaluationIds: ["eval-a", "eval-b"],
            summary: analysis.summary,
            strengths: analysis.strengths,
            gaps: analysis.gaps,
            nextSteps: analysis.nextSteps
          }])
        }))

      it.effect("every business row carries the time it was stored, never a zero date", () =>
        Effect.gen(function*() {
          const unitOfWork = yield* UnitOfWork
          const projector = yield* syntheticEchoProjector
          const job = yield* echoJob
          const before = yield* Clock.currentTimeMillis
          yield* unitOfWork.transaction(projector.project(job, { echo: "stamped" }))
          const after = yield* Clock.currentTimeMillis
          const [row] = yield* storedRows(job.id)
          const createdAt = row?.created_at
          expect(createdAt).toBeInstanceOf(Date)
          const stamped = createdAt instanceof Date ? createdAt.getTime() : Number.NaN
          // The database's clock and the test's may differ by a little; a zero date is off by ages.
          expect(stamped).toBeGreaterThanOrEqual(before - 5_000)
          expect(stamped).toBeLessThanOrEqual(after + 5_000)
        }))
    })
  })
