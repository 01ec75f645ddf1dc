import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { checkDatabase, describeViolations, type RuleName } from "../../chaos/checker.js"
import { scratchMysqlLayer } from "../support/scratchDatabase.js"

/**
 * The chaos run's checker must be able to fail: a migrated scratch database with one healthy job
 * of each kind and one planted violation per rule, and the checker must name each of them (and
 * nothing about the healthy jobs).
 */

const insertJob = (
  id: string,
  options: {
    readonly jobType?: "flashcard_generation" | "feynman_evaluation"
    readonly status: string
    readonly attempts?: number
    readonly maxAttempts?: number
    readonly errorCode?: string
    readonly cancelRequested?: boolean
    readonly started?: boolean
    readonly count?: number
  }
) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const jobType = options.jobType ?? "flashcard_generation"
    const input = jobType === "flashcard_generation"
      ? JSON.stringify({ sourceText: "text", count: options.count ?? 2 })
      : JSON.stringify({ concept: "energy", explanation: "it is conserved" })
    return sql`
      INSERT INTO ai_job (id, user_id, job_type, target_type, target_id, idempotency_key, status, lifecycle_status,
        queue_name, priority, input, credential_mode, prompt_version, input_schema_version, output_schema_version,
        attempt_count, max_attempts, error_code, cancel_requested_at, started_at, created_at, updated_at)
      VALUES (${id}, 'checker-user', ${jobType}, 'none', ${id}, ${id}, ${options.status.toUpperCase()}, ${options.status},
        'ai-background', 50, ${input}, 'platform_key', 'v1', 'in.v1', 'out.v1',
        ${options.attempts ?? 1}, ${options.maxAttempts ?? 3}, ${options.errorCode ?? null},
        ${options.cancelRequested === true ? new Date() : null}, ${options.started === false ? null : new Date()},
        UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`
  })

const insertFlashcards = (jobId: string, n: number, options: { readonly artifacts?: number } = {}) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      Effect.forEach(Array.from({ length: n }, (_, ordinal) => ordinal), (ordinal) =>
        Effect.gen(function*() {
          const rowId = `${jobId.slice(0, 30)}-f${ordinal}`
          yield* sql`INSERT INTO flashcard (id, job_id, user_id, ordinal, front, back, created_at)
          VALUES (${rowId}, ${jobId}, 'checker-user', ${ordinal}, 'front', 'back', UTC_TIMESTAMP(3))`
          if (ordinal < (options.artifacts ?? n)) {
            yield* sql`INSERT INTO ai_job_artifact (id, job_id, artifact_type, artifact_id, ordinal, created_at)
            VALUES (${`${rowId}-a`}, ${jobId}, 'flashcard', ${rowId}, ${ordinal}, UTC_TIMESTAMP(3))`
          }
        }))
  )

const insertEvaluation = (jobId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.gen(function*() {
      const rowId = `${jobId.slice(0, 30)}-e`
      yield* sql`INSERT INTO learning_evaluation (id, job_id, user_id, concept, score, feedback, gaps, created_at)
        VALUES (${rowId}, ${jobId}, 'checker-user', 'energy', 80, 'good', '[]', UTC_TIMESTAMP(3))`
      yield* sql`INSERT INTO ai_job_artifact (id, job_id, artifact_type, artifact_id, ordinal, created_at)
        VALUES (${`${rowId}-a`}, ${jobId}, 'learning_evaluation', ${rowId}, 0, UTC_TIMESTAMP(3))`
    }))

const insertEvent = (jobId: string, suffix: string, status: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql`INSERT INTO outbox_event (id, event_type, aggregate_type, aggregate_id, dedupe_key, payload, status, attempt_count,
        available_at, created_at, updated_at)
      VALUES (${`${
        jobId.slice(0, 30)
      }-${suffix}`}, 'ai.job.enqueue', 'AiJob', ${jobId}, ${`ai.job.enqueue:${jobId}:${suffix}`}, '{}',
        ${status}, 1, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`
  )

const insertUsage = (jobId: string, attemptNo: number, suffix: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql`INSERT INTO ai_usage_log (id, job_id, attempt_no, credential_mode, provider, model, latency_ms, created_at)
      VALUES (${`${
        jobId.slice(0, 30)
      }-u${suffix}`}, ${jobId}, ${attemptNo}, 'platform_key', 'fake', 'fake-model', 10, UTC_TIMESTAMP(3))`
  )

/** A healthy job: succeeded with its rows, artifacts, published event and one usage row. */
const healthyFlashcards = (id: string) =>
  Effect.all([
    insertJob(id, { status: "succeeded", count: 2 }),
    insertFlashcards(id, 2),
    insertEvent(id, "e", "published"),
    insertUsage(id, 1, "1")
  ])

const rulesOf = (violations: ReadonlyArray<{ readonly rule: RuleName; readonly jobId?: string }>, jobId: string) =>
  violations.filter((v) => v.jobId === jobId).map((v) => v.rule).sort()

describe("chaos checker", () => {
  it.layer(scratchMysqlLayer("chaos_checker_clean"))("on a healthy database", (it) => {
    it.effect("reports no violation", () =>
      Effect.gen(function*() {
        yield* healthyFlashcards("job-ok-flash")
        yield* Effect.all([
          insertJob("job-ok-eval", { status: "succeeded", jobType: "feynman_evaluation" }),
          insertEvaluation("job-ok-eval"),
          insertEvent("job-ok-eval", "e", "published")
        ])
        yield* Effect.all([
          insertJob("job-ok-failed", { status: "failed", errorCode: "PROVIDER_UNAVAILABLE", attempts: 3 }),
          insertEvent("job-ok-failed", "e", "published")
        ])
        // Dead, but the job never ran: an honest dead event.
        yield* Effect.all([
          insertJob("job-ok-dead", { status: "cancelled", attempts: 0, started: false }),
          insertEvent("job-ok-dead", "e", "dead")
        ])
        const report = yield* checkDatabase({
          acknowledged: ["job-ok-flash", "job-ok-eval"],
          crashedJobs: new Set(),
          exactFlashcardCount: true
        })
        expect(report.violations).toEqual([])
        expect(report.jobsByStatus).toEqual({ succeeded: 2, failed: 1, cancelled: 1 })
        expect(report.failuresByCode).toEqual({ PROVIDER_UNAVAILABLE: 1 })
      }))

    it.effect("names a create held by a paused Redis and a hand-off that failed its delivery, beside a healthy database", () =>
      Effect.gen(function*() {
        const report = yield* checkDatabase({
          createsHeldByRedis: ["answered 503 after 4900 ms (deadline 2500 ms)"],
          handBacksFailed: ["worker-2.log: Queue delivery failed; reason=JobHandedOff: worker stopping"]
        })
        expect(report.violations.map((violation) => violation.rule)).toEqual([
          "createHeldByRedis",
          "handBackUsedAttempt"
        ])
        expect(describeViolations(report.violations).join("\n")).toContain("waited past the create deadline")
      }))
  })

  it.layer(scratchMysqlLayer("chaos_checker_planted"))("on a database with planted violations", (it) => {
    it.effect("names each one", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* healthyFlashcards("job-healthy")
        // Succeeded without artifacts.
        yield* Effect.all([
          insertJob("job-no-artifacts", { status: "succeeded", count: 2 }),
          insertFlashcards("job-no-artifacts", 2, { artifacts: 0 }),
          insertEvent("job-no-artifacts", "e", "published")
        ])
        // Succeeded with fewer cards than the provider always answers.
        yield* Effect.all([
          insertJob("job-short", { status: "succeeded", count: 3 }),
          insertFlashcards("job-short", 2),
          insertEvent("job-short", "e", "published")
        ])
        // Failed, yet projected.
        yield* Effect.all([
          insertJob("job-failed-rows", { status: "failed", errorCode: "PROVIDER_UNAVAILABLE" }),
          insertFlashcards("job-failed-rows", 1),
          insertEvent("job-failed-rows", "e", "published")
        ])
        // A dead event whose job was delivered by it (no other event published).
        yield* Effect.all([
          insertJob("job-dead-delivered", { status: "succeeded", count: 1 }),
          insertFlashcards("job-dead-delivered", 1),
          insertEvent("job-dead-delivered", "e", "dead")
        ])
        // More attempts than allowed.
        yield* Effect.all([
          insertJob("job-attempts", {
            status: "failed",
            attempts: 4,
            maxAttempts: 3,
            errorCode: "PROVIDER_UNAVAILABLE"
          }),
          insertEvent("job-attempts", "e", "published")
        ])
        // Stuck, with an event still pending.
        yield* Effect.all([
          insertJob("job-stuck", { status: "running", attempts: 1 }),
          insertEvent("job-stuck", "e", "pending")
        ])
        // Two usage rows numbered alike (planted past the unique key a drifted schema might lack).
        yield* sql.unsafe("ALTER TABLE ai_usage_log DROP INDEX IF EXISTS uq_ai_usage_log_call")
        yield* Effect.all([insertUsage("job-healthy", 2, "2"), insertUsage("job-healthy", 2, "3")])
        // Failed for lost workers although none crashed while holding it.
        yield* Effect.all([
          insertJob("job-lost", { status: "failed", attempts: 2, maxAttempts: 2, errorCode: "INTERNAL_WORKER_LOST" }),
          insertEvent("job-lost", "e", "published")
        ])
        // Failed in PROJECT for the frozen owner's row locks: no crash explains that.
        yield* Effect.all([
          insertJob("job-frozen", { status: "failed", attempts: 2, errorCode: "INTERNAL_PERSISTENCE" }),
          insertEvent("job-frozen", "e", "published")
        ])
        // Failed for lost workers after a crash: explained.
        yield* Effect.all([
          insertJob("job-crashed", { status: "failed", attempts: 3, errorCode: "INTERNAL_WORKER_LOST" }),
          insertEvent("job-crashed", "e", "published")
        ])
        // A cancel refused with 409 that stamped the request all the same.
        yield* Effect.all([
          insertJob("job-cancel", { status: "succeeded", count: 1, cancelRequested: true }),
          insertFlashcards("job-cancel", 1),
          insertEvent("job-cancel", "e", "published")
        ])

        const report = yield* checkDatabase({
          acknowledged: ["job-healthy", "job-vanished"],
          cancelRefused: ["job-cancel"],
          crashedJobs: new Set(["job-frozen", "job-crashed"]),
          frozenJobs: new Set(["job-frozen"]),
          handedOffJobs: new Set(["job-lost"]),
          serverErrorAnswers: ["create: 500"],
          exactFlashcardCount: true
        })
        const v = report.violations
        expect(rulesOf(v, "job-healthy")).toEqual(["usageNotUnique"])
        expect(rulesOf(v, "job-no-artifacts")).toEqual(["succeededProjection"])
        expect(rulesOf(v, "job-short")).toEqual(["succeededProjection"])
        expect(rulesOf(v, "job-failed-rows")).toEqual(["leftoverProjection"])
        expect(rulesOf(v, "job-dead-delivered")).toEqual(["deadButDelivered"])
        expect(rulesOf(v, "job-attempts")).toEqual(["attemptsOverMax"])
        expect(rulesOf(v, "job-stuck")).toEqual(["notTerminal", "outboxUnpublished"])
        expect(rulesOf(v, "job-lost")).toEqual(["internalFailure"])
        expect(rulesOf(v, "job-cancel")).toEqual(["cancelAnswerMismatch"])
        expect(rulesOf(v, "job-vanished")).toEqual(["acknowledgedMissing"])
        expect(rulesOf(v, "job-frozen")).toEqual(["internalFailure"])
        expect(rulesOf(v, "job-crashed")).toEqual([])
        expect(v.filter((x) => x.rule === "serverError").map((x) => x.detail)).toEqual(["create: 500"])
        expect(v).toHaveLength(13)
        // The report names the known defect where one explains the rule.
        const text = describeViolations(v).join("\n")
        expect(text).toContain("[known: an abandoned queue add ran after the event was counted as failed]")
        expect(text).toContain(
          "[known: a SIGTERM hand-off used up an attempt, or a frozen owner's transaction failed the new owner]"
        )
        expect(text).toContain("[known: a commit whose outcome is unknown answers 500 instead of 503]")
        expect(v.find((x) => x.jobId === "job-lost")?.detail).toContain("SIGTERM")
        expect(v.find((x) => x.jobId === "job-frozen")?.detail).toContain("SIGSTOP")
      }))

    it.effect("counts usage per provider call: the same number in another lease is another call", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql.unsafe("ALTER TABLE ai_usage_log DROP INDEX IF EXISTS uq_ai_usage_log_call")
        // Call 1 of leases 1 and 2: two calls. Call 2 of lease 1, written twice: one duplicate.
        yield* Effect.all([
          insertUsage("job-per-call", 1, "1"),
          insertUsage("job-per-call", 1, "2"),
          insertUsage("job-per-call", 2, "3"),
          insertUsage("job-per-call", 2, "4")
        ])
        yield* sql`UPDATE ai_usage_log SET lease_no = 1 WHERE job_id = ${"job-per-call"}`
        yield* sql`UPDATE ai_usage_log SET lease_no = 2 WHERE id = ${"job-per-call-u2"}`
        const report = yield* checkDatabase()
        expect(
          report.violations.filter((x) => x.rule === "usageNotUnique" && x.jobId === "job-per-call").map((x) =>
            x.detail
          )
        ).toEqual([
          "2 usage rows with attempt_no 2 and the same lease_no"
        ])
      }))

    it.effect("finds business rows of no job", () =>
      Effect.gen(function*() {
        yield* insertFlashcards("job-never-existed", 1)
        const report = yield* checkDatabase()
        expect(report.violations.filter((x) => x.rule === "orphanRows").map((x) => x.detail)).toEqual([
          "1 flashcard rows whose job does not exist",
          "1 ai_job_artifact rows whose job does not exist"
        ])
      }))
  })
})
