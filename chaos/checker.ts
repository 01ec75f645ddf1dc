import { SqlClient, type SqlError } from "@effect/sql"
import { Effect, type ParseResult, Schema } from "effect"

/**
 * What the chaos run checks in MySQL once the fleet has drained: every job terminal, exactly
 * one projection per succeeded job and none for the others, the outbox published, attempts
 * within their limit, one usage row per provider call. Each broken rule is one `Violation`;
 * a rule that a known defect breaks names that defect, so a failing run says whether it is news.
 */

export const rules = {
  notTerminal: { title: "job not terminal after the drain" },
  acknowledgedMissing: { title: "job acknowledged to a client is missing (lost)" },
  succeededProjection: { title: "succeeded job without exactly its business rows and artifacts" },
  leftoverProjection: { title: "failed or cancelled job has business rows or artifacts" },
  orphanRows: { title: "business rows or artifacts that belong to no job" },
  attemptsOverMax: { title: "attempt_count above max_attempts" },
  outboxUnpublished: { title: "outbox event left unpublished" },
  deadButDelivered: {
    title: "outbox event dead although its job was delivered",
    defect: "an abandoned queue add ran after the event was counted as failed"
  },
  usageNotUnique: {
    title: "two usage rows for one provider call",
    defect: "attempt_no is \"existing rows + 1\", a zombie and its successor write the same number"
  },
  cancelAnswerMismatch: {
    title: "cancel answered 409 although it stamped cancel_requested_at",
    defect: "the cancel answer does not match what was written"
  },
  internalFailure: {
    title: "job failed for an internal reason that no crash of its worker explains",
    defect: "a SIGTERM hand-off used up an attempt, or a frozen owner's transaction failed the new owner"
  },
  serverError: {
    title: "a request answered 5xx other than 503",
    defect: "a commit whose outcome is unknown answers 500 instead of 503"
  },
  unexpectedAnswer: { title: "a request answered 4xx that a well-behaved client never gets" },
  createHeldByRedis: { title: "a create sent while Redis was paused waited past the create deadline" },
  handBackUsedAttempt: { title: "a job handed back by a stopping worker failed its delivery (used a queue attempt)" }
} as const satisfies Record<string, { readonly title: string; readonly defect?: string }>

export type RuleName = keyof typeof rules

export interface Violation {
  readonly rule: RuleName
  readonly jobId?: string
  readonly detail: string
}

/** What the run knows beyond MySQL: what clients were told and which jobs lost a worker. */
export interface CheckContext {
  /** Job ids a create answered 200/202 for: each must exist. */
  readonly acknowledged?: ReadonlyArray<string>
  /** Jobs whose cancel answered 409 (the only cancel the run sent for them). */
  readonly cancelRefused?: ReadonlyArray<string>
  /**
   * Jobs held by a worker when it was killed (-9) or frozen (SIGSTOP): they may fail with an
   * internal code once their attempts run out. Without it, the internal-failure rule is skipped.
   */
  readonly crashedJobs?: ReadonlySet<string>
  /** Jobs held by a worker when it was frozen (SIGSTOP), to name that in a message: its transaction may fail the new owner. */
  readonly frozenJobs?: ReadonlySet<string>
  /** Jobs held by a worker when it was asked to stop (SIGTERM), to name that in a message: a hand-off may use up an attempt. */
  readonly handedOffJobs?: ReadonlySet<string>
  /** What clients were answered besides success: 5xx other than 503, and 4xx. */
  readonly serverErrorAnswers?: ReadonlyArray<string>
  readonly unexpectedAnswers?: ReadonlyArray<string>
  /** The provider always answers `count` cards: a succeeded flashcard job then has exactly that many rows. */
  readonly exactFlashcardCount?: boolean
  /** Creates sent while Redis was paused that were answered late (or not at all), described. */
  readonly createsHeldByRedis?: ReadonlyArray<string>
  /** Worker log lines of hand-backs that failed their delivery instead of going straight back. */
  readonly handBacksFailed?: ReadonlyArray<string>
}

export interface CheckReport {
  readonly violations: ReadonlyArray<Violation>
  readonly jobs: number
  readonly jobsByStatus: Readonly<Record<string, number>>
  readonly failuresByCode: Readonly<Record<string, number>>
  readonly outboxByStatus: Readonly<Record<string, number>>
  /** Outbox events beyond the first per job (requeues and redispatches). */
  readonly extraOutboxEvents: number
  readonly attempts: number
  /**
   * Jobs that took more than one attempt although no worker holding them crashed, and how many
   * of those a SIGTERM hand-off touched (the known defect where a hand-off uses up an attempt).
   * Not a violation: a lease can also lapse on an overloaded machine.
   */
  readonly retakenWithoutCrash: { readonly jobs: number; readonly handedOff: number } | undefined
  readonly usageRows: number
}

const terminalStatuses = new Set(["succeeded", "failed", "cancelled"])

const Count = Schema.Number
const Flag = Schema.Union(Schema.Number, Schema.BigIntFromSelf).pipe(
  Schema.transform(Schema.Boolean, { strict: true, decode: (n) => Number(n) !== 0, encode: (b) => (b ? 1 : 0) })
)

const JobRow = Schema.Struct({
  id: Schema.String,
  jobType: Schema.String,
  lifecycleStatus: Schema.String,
  attemptCount: Count,
  maxAttempts: Count,
  errorCode: Schema.NullOr(Schema.String),
  cancelRequested: Flag,
  requestedCount: Schema.NullOr(Count),
  artifacts: Count,
  matchedArtifacts: Count,
  artifactOrdinals: Count,
  flashcards: Count,
  flashcardOrdinals: Count,
  flashcardMaxOrdinal: Count,
  evaluations: Count,
  echoes: Count
})

const jobsQuery = `
SELECT j.id, j.job_type, j.lifecycle_status, j.attempt_count, j.max_attempts, j.error_code,
  (j.cancel_requested_at IS NOT NULL) AS cancel_requested,
  CAST(JSON_UNQUOTE(JSON_EXTRACT(j.input, '$.count')) AS SIGNED) AS requested_count,
  (SELECT COUNT(*) FROM ai_job_artifact a WHERE a.job_id = j.id) AS artifacts,
  (SELECT COUNT(*) FROM ai_job_artifact a WHERE a.job_id = j.id AND (
     (a.artifact_type = 'flashcard' AND a.artifact_id IN (SELECT f.id FROM flashcard f WHERE f.job_id = j.id))
     OR (a.artifact_type = 'learning_evaluation' AND a.artifact_id IN (SELECT e.id FROM learning_evaluation e WHERE e.job_id = j.id))
     OR (a.artifact_type = 'synthetic_echo_result' AND a.artifact_id IN (SELECT s.id FROM synthetic_echo_result s WHERE s.job_id = j.id))
  )) AS matched_artifacts,
  (SELECT COUNT(DISTINCT a.ordinal) FROM ai_job_artifact a WHERE a.job_id = j.id) AS artifact_ordinals,
  (SELECT COUNT(*) FROM flashcard f WHERE f.job_id = j.id) AS flashcards,
  (SELECT COUNT(DISTINCT f.ordinal) FROM flashcard f WHERE f.job_id = j.id) AS flashcard_ordinals,
  (SELECT COALESCE(MAX(f.ordinal), -1) FROM flashcard f WHERE f.job_id = j.id) AS flashcard_max_ordinal,
  (SELECT COUNT(*) FROM learning_evaluation e WHERE e.job_id = j.id) AS evaluations,
  (SELECT COUNT(*) FROM synthetic_echo_result s WHERE s.job_id = j.id) AS echoes
FROM ai_job j`

const OrphanRow = Schema.Struct({ source: Schema.String, n: Count })
const orphansQuery = `
SELECT 'flashcard' AS source, COUNT(*) AS n FROM flashcard WHERE job_id NOT IN (SELECT id FROM ai_job)
UNION ALL SELECT 'learning_evaluation', COUNT(*) FROM learning_evaluation WHERE job_id NOT IN (SELECT id FROM ai_job)
UNION ALL SELECT 'synthetic_echo_result', COUNT(*) FROM synthetic_echo_result WHERE job_id NOT IN (SELECT id FROM ai_job)
UNION ALL SELECT 'ai_job_artifact', COUNT(*) FROM ai_job_artifact WHERE job_id NOT IN (SELECT id FROM ai_job)`

const OutboxRow = Schema.Struct({
  id: Schema.String,
  aggregateId: Schema.String,
  status: Schema.String,
  dedupeKey: Schema.String,
  jobStatus: Schema.NullOr(Schema.String),
  jobRan: Schema.NullOr(Flag),
  publishedSiblings: Count
})
const outboxQuery = `
SELECT o.id, o.aggregate_id, o.status, o.dedupe_key, j.lifecycle_status AS job_status,
  (j.started_at IS NOT NULL OR j.attempt_count > 0) AS job_ran,
  (SELECT COUNT(*) FROM outbox_event p WHERE p.aggregate_id = o.aggregate_id AND p.status = 'published') AS published_siblings
FROM outbox_event o LEFT JOIN ai_job j ON j.id = o.aggregate_id
WHERE o.status <> 'published'`

const StatusCount = Schema.Struct({ status: Schema.String, n: Count })
const DuplicateUsage = Schema.Struct({ jobId: Schema.String, attemptNo: Count, n: Count })
const ColumnCount = Schema.Struct({ n: Count })
const ColumnName = Schema.Struct({ name: Schema.String })

const rowsOf = <A, I>(schema: Schema.Schema<A, I>, query: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(query)).pipe(
    Effect.flatMap(Schema.decodeUnknown(Schema.Array(schema)))
  )

const tally = (pairs: Iterable<readonly [string, number]>) => {
  const out: Record<string, number> = {}
  for (const [key, n] of pairs) out[key] = (out[key] ?? 0) + n
  return out
}

/** What is wrong with one job's projection, or undefined when it is exactly right. */
const projectionProblem = (job: typeof JobRow.Type, exactFlashcardCount: boolean): string | undefined => {
  const rows = job.flashcards + job.evaluations + job.echoes
  if (job.lifecycleStatus !== "succeeded") {
    return rows === 0 && job.artifacts === 0
      ? undefined
      : `${job.lifecycleStatus} with ${rows} business rows and ${job.artifacts} artifacts`
  }
  const artifactsMatch = job.artifacts === rows && job.matchedArtifacts === rows && job.artifactOrdinals === rows
  switch (job.jobType) {
    case "flashcard_generation": {
      const n = job.flashcards
      const contiguous = job.flashcardOrdinals === n && job.flashcardMaxOrdinal === n - 1
      const withinCount = job.requestedCount === null || n <= job.requestedCount
      const exact = !exactFlashcardCount || job.requestedCount === null || n === job.requestedCount
      return n >= 1 && contiguous && withinCount && exact && artifactsMatch && job.evaluations + job.echoes === 0
        ? undefined
        : `${n} flashcards (ordinals ${job.flashcardOrdinals} distinct, max ${job.flashcardMaxOrdinal}; ${
          job.requestedCount ?? "?"
        } asked), ` +
          `${job.artifacts} artifacts (${job.matchedArtifacts} match a row), ${job.evaluations + job.echoes} other rows`
    }
    case "feynman_evaluation":
      return job.evaluations === 1 && rows === 1 && artifactsMatch
        ? undefined
        : `${job.evaluations} evaluations, ${
          rows - job.evaluations
        } other rows, ${job.artifacts} artifacts (${job.matchedArtifacts} match a row)`
    case "synthetic_echo":
      return job.echoes === 1 && rows === 1 && artifactsMatch
        ? undefined
        : `${job.echoes} echo rows, ${
          rows - job.echoes
        } other rows, ${job.artifacts} artifacts (${job.matchedArtifacts} match a row)`
    default:
      return rows >= 1 && artifactsMatch
        ? undefined
        : `${rows} business rows, ${job.artifacts} artifacts (${job.matchedArtifacts} match a row)`
  }
}

/**
 * Reads the database the `SqlClient` points at and checks every rule. Usage rows must be unique
 * per provider call, however the schema numbers calls.
 */
export const checkDatabase = (
  context: CheckContext = {}
): Effect.Effect<CheckReport, SqlError.SqlError | ParseResult.ParseError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const violations: Array<Violation> = []
    const jobs = yield* rowsOf(JobRow, jobsQuery)
    const byId = new Map(jobs.map((job) => [job.id, job]))

    for (const job of jobs) {
      if (!terminalStatuses.has(job.lifecycleStatus)) {
        violations.push({
          rule: "notTerminal",
          jobId: job.id,
          detail: `${job.lifecycleStatus}, attempt ${job.attemptCount} of ${job.maxAttempts}`
        })
      }
      const problem = terminalStatuses.has(job.lifecycleStatus)
        ? projectionProblem(job, context.exactFlashcardCount ?? false)
        : undefined
      if (problem !== undefined) {
        violations.push({
          rule: job.lifecycleStatus === "succeeded" ? "succeededProjection" : "leftoverProjection",
          jobId: job.id,
          detail: problem
        })
      }
      if (job.attemptCount > job.maxAttempts) {
        violations.push({
          rule: "attemptsOverMax",
          jobId: job.id,
          detail: `${job.attemptCount} attempts, at most ${job.maxAttempts}`
        })
      }
      // A lost worker explains INTERNAL_WORKER_LOST only if a worker holding the job crashed;
      // no crash explains any other internal failure.
      const crashed = context.crashedJobs
      const code = job.errorCode ?? ""
      if (
        crashed !== undefined && job.lifecycleStatus === "failed" && code.startsWith("INTERNAL_") &&
        !(code === "INTERNAL_WORKER_LOST" && crashed.has(job.id))
      ) {
        const hints = [
          ...(context.handedOffJobs?.has(job.id) === true
            ? ["its worker was stopped with SIGTERM while holding it: its hand-off may have used up an attempt"]
            : []),
          ...(context.frozenJobs?.has(job.id) === true
            ? [
              "its worker was frozen with SIGSTOP while holding it: its open transaction may have failed the new owner"
            ]
            : [])
        ]
        violations.push({
          rule: "internalFailure",
          jobId: job.id,
          detail: `${code} after ${job.attemptCount} of ${job.maxAttempts} attempts${
            hints.length === 0 ? "" : `; ${hints.join("; ")}`
          }`
        })
      }
    }

    for (const jobId of context.acknowledged ?? []) {
      if (!byId.has(jobId)) {
        violations.push({ rule: "acknowledgedMissing", jobId, detail: "a create answered with this id; no ai_job row" })
      }
    }
    for (const jobId of context.cancelRefused ?? []) {
      const job = byId.get(jobId)
      if (job?.cancelRequested === true) {
        violations.push({
          rule: "cancelAnswerMismatch",
          jobId,
          detail: `answered 409; the job is ${job.lifecycleStatus} with cancel_requested_at set`
        })
      }
    }

    for (const answer of context.serverErrorAnswers ?? []) violations.push({ rule: "serverError", detail: answer })
    for (const answer of context.unexpectedAnswers ?? []) violations.push({ rule: "unexpectedAnswer", detail: answer })
    for (const create of context.createsHeldByRedis ?? []) {
      violations.push({ rule: "createHeldByRedis", detail: create })
    }
    for (const line of context.handBacksFailed ?? []) violations.push({ rule: "handBackUsedAttempt", detail: line })

    for (const orphan of yield* rowsOf(OrphanRow, orphansQuery)) {
      if (orphan.n > 0) {
        violations.push({ rule: "orphanRows", detail: `${orphan.n} ${orphan.source} rows whose job does not exist` })
      }
    }

    for (const event of yield* rowsOf(OutboxRow, outboxQuery)) {
      if (event.status === "dead") {
        // Delivered by this event: the job ran although no other event of it was published.
        if (event.jobRan === true && event.publishedSiblings === 0) {
          violations.push({
            rule: "deadButDelivered",
            jobId: event.aggregateId,
            detail: `event ${event.dedupeKey} dead; its job ran and is ${event.jobStatus ?? "missing"}`
          })
        }
      } else {
        violations.push({
          rule: "outboxUnpublished",
          jobId: event.aggregateId,
          detail: `event ${event.dedupeKey} is ${event.status}`
        })
      }
    }

    // A provider call is (job, lease, number within the lease) where the schema numbers calls
    // per lease (`lease_no`, migration 0012); before that, (job, attempt_no).
    const callColumns = yield* rowsOf(
      ColumnName,
      "SELECT COLUMN_NAME AS name FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'ai_usage_log' AND COLUMN_NAME IN ('lease_no', 'call_no') ORDER BY COLUMN_NAME DESC"
    )
    const perCall = callColumns.map((column) => `, ${column.name}`).join("")
    const duplicates = yield* rowsOf(
      DuplicateUsage,
      `SELECT job_id, attempt_no, COUNT(*) AS n FROM ai_usage_log GROUP BY job_id, attempt_no${perCall} HAVING COUNT(*) > 1`
    )
    for (const duplicate of duplicates) {
      violations.push({
        rule: "usageNotUnique",
        jobId: duplicate.jobId,
        detail: `${duplicate.n} usage rows with attempt_no ${duplicate.attemptNo}${
          callColumns.length === 0 ? "" : ` and the same ${callColumns.map((column) => column.name).join(" and ")}`
        }`
      })
    }

    const outboxByStatus = tally(
      (yield* rowsOf(StatusCount, "SELECT status, COUNT(*) AS n FROM outbox_event GROUP BY status")).map((r) =>
        [r.status, r.n] as const
      )
    )
    // Jobs' terminal events (the notify lane) are one per ended job, not extra enqueues.
    const [enqueueEvents] = yield* rowsOf(ColumnCount, "SELECT COUNT(*) AS n FROM outbox_event WHERE lane = 'enqueue'")
    const [usage] = yield* rowsOf(ColumnCount, "SELECT COUNT(*) AS n FROM ai_usage_log")

    return {
      violations,
      jobs: jobs.length,
      jobsByStatus: tally(jobs.map((job) => [job.lifecycleStatus, 1] as const)),
      failuresByCode: tally(
        jobs.filter((job) => job.lifecycleStatus === "failed").map((job) => [job.errorCode ?? "(none)", 1] as const)
      ),
      outboxByStatus,
      extraOutboxEvents: Math.max(0, (enqueueEvents?.n ?? 0) - jobs.length),
      attempts: jobs.reduce((total, job) => total + job.attemptCount, 0),
      retakenWithoutCrash: context.crashedJobs === undefined ? undefined : (() => {
        const retaken = jobs.filter((job) => job.attemptCount > 1 && context.crashedJobs?.has(job.id) !== true)
        return {
          jobs: retaken.length,
          handedOff: retaken.filter((job) => context.handedOffJobs?.has(job.id) === true).length
        }
      })(),
      usageRows: usage?.n ?? 0
    }
  })

/** One line per rule that was broken: its title, how often, the defect it points to, examples. */
export const describeViolations = (violations: ReadonlyArray<Violation>, examples = 3): ReadonlyArray<string> => {
  const byRule = new Map<RuleName, Array<Violation>>()
  for (const violation of violations) byRule.set(violation.rule, [...(byRule.get(violation.rule) ?? []), violation])
  return [...byRule].flatMap(([rule, list]) => {
    const spec: { readonly title: string; readonly defect?: string } = rules[rule]
    return [
      `${spec.title}: ${list.length}${spec.defect === undefined ? "" : `  [known: ${spec.defect}]`}`,
      ...list.slice(0, examples).map((v) => `    ${v.jobId === undefined ? "" : `job ${v.jobId}: `}${v.detail}`)
    ]
  })
}
