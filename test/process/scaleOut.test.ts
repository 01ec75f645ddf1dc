import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Schema } from "effect"
import { nodeProgram, spawnProgram } from "./support/childProcess.js"
import {
  createJob,
  dispatcherStarted,
  engineEnv,
  engineStorage,
  feynmanRequest,
  flashcardRequest,
  pollJob,
  queryRows,
  startProgram,
  tokenFor,
  withDatabase,
  workerStarted
} from "./support/engine.js"

const users = 10
const jobsPerUser = 10

/** Per job: its status, attempts, artifacts, and the business rows its projection wrote. */
const JobSummary = Schema.Struct({
  id: Schema.String,
  lockedBy: Schema.NullOr(Schema.String),
  jobType: Schema.String,
  lifecycleStatus: Schema.String,
  attemptCount: Schema.Number,
  artifacts: Schema.Number,
  distinctArtifacts: Schema.Number,
  orphanArtifacts: Schema.Number,
  flashcards: Schema.Number,
  evaluations: Schema.Number
})

const summaryQuery = `
SELECT j.id, j.locked_by, j.job_type, j.lifecycle_status, j.attempt_count,
  (SELECT COUNT(*) FROM ai_job_artifact a WHERE a.job_id = j.id) AS artifacts,
  (SELECT COUNT(DISTINCT a.artifact_type, a.artifact_id, a.ordinal) FROM ai_job_artifact a WHERE a.job_id = j.id) AS distinct_artifacts,
  (SELECT COUNT(*) FROM ai_job_artifact a WHERE a.job_id = j.id
     AND a.artifact_id NOT IN (SELECT f.id FROM flashcard f WHERE f.job_id = j.id)
     AND a.artifact_id NOT IN (SELECT e.id FROM learning_evaluation e WHERE e.job_id = j.id)) AS orphan_artifacts,
  (SELECT COUNT(*) FROM flashcard f WHERE f.job_id = j.id) AS flashcards,
  (SELECT COUNT(*) FROM learning_evaluation e WHERE e.job_id = j.id) AS evaluations
FROM ai_job j`

describe("issue 7: MySQL + Redis, scaled out", () => {
  it.live(
    "start:api, two start:worker, two start:dispatcher: 100 jobs over HTTP all succeed, one set of artifacts each",
    () =>
      Effect.gen(function*() {
        const storage = yield* engineStorage("scale", { migrate: false })
        // Migrated as an operator would: `npm run migrate`.
        const [command, args] = nodeProgram("migrate")
        const migrate = yield* spawnProgram("migrate", command, args, engineEnv(storage))
        const migrated = yield* migrate.awaitExit(Duration.seconds(30))
        expect(migrated, migrate.tail()).toEqual({ code: 0, signal: null })
        expect(migrate.output()).toMatch(/Applied \d+ migration\(s\)/)

        const env = engineEnv(storage, {
          MAX_ACTIVE_JOBS_PER_USER: String(jobsPerUser),
          WORKER_CONCURRENCY_BACKGROUND: "4",
          WORKER_CONCURRENCY_INTERACTIVE: "4",
          SYNTHETIC_LATENCY_MS: "20-80"
        })
        const [api] = yield* Effect.all(
          [
            startProgram("api", "api", env),
            startProgram("worker", "worker 1", { ...env, WORKER_ID: "scale-worker-1" }, { ready: workerStarted }),
            startProgram("worker", "worker 2", { ...env, WORKER_ID: "scale-worker-2" }, { ready: workerStarted }),
            startProgram("dispatcher", "dispatcher 1", env, { ready: dispatcherStarted }),
            startProgram("dispatcher", "dispatcher 2", env, { ready: dispatcherStarted })
          ],
          { concurrency: "unbounded" }
        )

        const started = Date.now()
        const requests = Array.from(
          { length: users * jobsPerUser },
          (_, i) => ({ user: `scale-user-${i % users}`, index: i })
        )
        const created = yield* Effect.forEach(
          requests,
          ({ index, user }) =>
            Effect.gen(function*() {
              const token = yield* tokenFor(storage, user)
              const job = index % 2 === 0
                ? yield* createJob(api.baseUrl, token, "flashcard-generations", flashcardRequest(index))
                : yield* createJob(api.baseUrl, token, "feynman-evaluations", feynmanRequest(index))
              return { job, token }
            }),
          { concurrency: 8 }
        )
        const done = yield* Effect.forEach(
          created,
          ({ job, token }) =>
            pollJob(api.baseUrl, token, job.jobId, { timeout: Duration.seconds(45), every: Duration.millis(250) }),
          { concurrency: 10 }
        )
        const elapsedMs = Date.now() - started
        expect(done.filter((job) => job.lifecycleStatus !== "succeeded")).toEqual([])

        const summary = yield* withDatabase(storage, queryRows(JobSummary, summaryQuery))
        expect(summary).toHaveLength(users * jobsPerUser)
        for (const job of summary) {
          expect(job.lifecycleStatus).toBe("succeeded")
          expect(job.distinctArtifacts).toBe(job.artifacts)
          expect(job.orphanArtifacts).toBe(0)
          if (job.jobType === "flashcard_generation") {
            expect(job.flashcards).toBeGreaterThanOrEqual(1)
            expect(job.flashcards).toBeLessThanOrEqual(3)
            expect(job.artifacts).toBe(job.flashcards)
            expect(job.evaluations).toBe(0)
          } else {
            expect(job.jobType).toBe("feynman_evaluation")
            expect(job.evaluations).toBe(1)
            expect(job.artifacts).toBe(1)
            expect(job.flashcards).toBe(0)
          }
        }
        // Both workers took part (each job keeps the id of the worker that ran it).
        expect(new Set(summary.map((job) => job.lockedBy))).toEqual(new Set(["scale-worker-1", "scale-worker-2"]))
        const attempts = summary.reduce((total, job) => total + job.attemptCount, 0)
        const apiView = new Map(done.map((job) => [job.jobId, job.result?.artifactCount]))
        for (const job of summary) expect(apiView.get(job.id)).toBe(job.artifacts)
        console.log(`100 jobs through api + 2 workers + 2 dispatchers: ${elapsedMs} ms; attempts ${attempts}`)
      }).pipe(Effect.scoped),
    { timeout: 90_000 }
  )
})
