import { Duration, Effect, Schema } from "effect"
import type mysql from "mysql2/promise"
import { AiJobService } from "../src/services/AiJobService.js"
import { monoMillis, queryAs, runPaced, wallMillis } from "./infra.js"
import { cpuMsPerJobSince } from "./procStat.js"
import { commitsOf, diffCounts, type SqlCounter, type SqlCounts } from "./sqlCounter.js"
import { type LatencySummary, perJobCounts, round, summarize } from "./stats.js"

/** Distinct users, so per-user admission (a gate row lock and two counts) is realistic, not one hot row. */
const benchUsers = 1_000

export type Phase = "warmup" | "one" | "full" | "half"

const requestFor = (phase: Phase, index: number) => ({
  userId: `bench-user-${index % benchUsers}`,
  jobType: "synthetic_echo",
  targetType: `bench_${phase}`,
  targetId: String(index),
  input: { message: `bench ${phase} job ${index}` }
})

const TerminalCount = Schema.Struct({ done: Schema.Number, failed: Schema.Number })

/** Waits (polling the bench's own pool, never the engine's) until `count` jobs of `phase` are terminal. */
export const awaitTerminal = (pool: mysql.Pool, targetType: string, count: number, timeout: Duration.DurationInput) =>
  Effect.gen(function*() {
    while (true) {
      const [row] = yield* queryAs(
        pool,
        TerminalCount,
        `SELECT CAST(COUNT(*) AS SIGNED) AS done, CAST(COALESCE(SUM(lifecycle_status <> 'succeeded'), 0) AS SIGNED) AS failed
           FROM ai_job WHERE target_type = ? AND lifecycle_status IN ('succeeded', 'failed', 'cancelled')`,
        [targetType]
      )
      if (row !== undefined && row.done >= count) return row
      yield* Effect.sleep("50 millis")
    }
  }).pipe(
    Effect.timeoutFail({
      duration: timeout,
      onTimeout: () => new Error(`${targetType}: fewer than ${count} jobs finished within ${Duration.format(timeout)}`)
    }),
    Effect.orDie
  )

const JobTimes = Schema.Struct({
  lifecycleStatus: Schema.String,
  publishedAt: Schema.NullOr(Schema.DateFromSelf),
  /** Set by a dispatcher's claim; null when the creator queued the job itself and marked it later. */
  publishedBy: Schema.NullOr(Schema.String),
  createdAt: Schema.DateFromSelf,
  startedAt: Schema.NullOr(Schema.DateFromSelf),
  finishedAt: Schema.NullOr(Schema.DateFromSelf)
})

/** Creation, start and end of every job of a phase, all from the database clock. */
const jobTimes = (pool: mysql.Pool, targetType: string) =>
  queryAs(
    pool,
    JobTimes,
    `SELECT j.lifecycle_status AS lifecycleStatus, j.created_at AS createdAt, j.started_at AS startedAt,
            j.finished_at AS finishedAt, o.published_at AS publishedAt, o.locked_by AS publishedBy
       FROM ai_job j LEFT JOIN outbox_event o ON o.aggregate_id = j.id AND o.aggregate_type = 'AiJob'
      WHERE j.target_type = ?`,
    [targetType]
  )

const latencies = (rows: ReadonlyArray<typeof JobTimes.Type>) => {
  const toRunning: Array<number> = []
  const toSucceeded: Array<number> = []
  const toPublished: Array<number> = []
  const publishedToRunning: Array<number> = []
  let lastFinished = 0
  let firstCreated = Number.POSITIVE_INFINITY
  for (const row of rows) {
    firstCreated = Math.min(firstCreated, row.createdAt.getTime())
    if (row.startedAt !== null) toRunning.push(row.startedAt.getTime() - row.createdAt.getTime())
    // A creator's own add is marked published in batches later: its published_at times no hop.
    if (row.publishedAt !== null && row.publishedBy !== null) {
      toPublished.push(row.publishedAt.getTime() - row.createdAt.getTime())
      if (row.startedAt !== null) publishedToRunning.push(row.startedAt.getTime() - row.publishedAt.getTime())
    }
    if (row.finishedAt !== null) {
      lastFinished = Math.max(lastFinished, row.finishedAt.getTime())
      if (row.lifecycleStatus === "succeeded") toSucceeded.push(row.finishedAt.getTime() - row.createdAt.getTime())
    }
  }
  return {
    toRunning: summarize(toRunning),
    toSucceeded: summarize(toSucceeded),
    breakdown: { commitToPublished: summarize(toPublished), publishedToRunning: summarize(publishedToRunning) },
    lastFinished,
    firstCreated
  }
}

const ServerStatusRow = Schema.Struct({ Variable_name: Schema.String, Value: Schema.String })
const serverStatusNames = ["Questions", "Com_commit", "Com_insert", "Com_update", "Com_select", "Com_delete"] as const
export type ServerStatus = Readonly<Record<(typeof serverStatusNames)[number], number>>

/** MariaDB's server-wide counters (every client of the server, so only a cross-check). */
export const serverStatus = (pool: mysql.Pool) =>
  Effect.map(
    queryAs(
      pool,
      ServerStatusRow,
      `SHOW GLOBAL STATUS WHERE Variable_name IN (${serverStatusNames.map(() => "?").join(", ")})`,
      [
        ...serverStatusNames
      ]
    ),
    (rows): ServerStatus => {
      const value = (name: string) => Number(rows.find((row) => row.Variable_name === name)?.Value ?? 0)
      return {
        Questions: value("Questions"),
        Com_commit: value("Com_commit"),
        Com_insert: value("Com_insert"),
        Com_update: value("Com_update"),
        Com_select: value("Com_select"),
        Com_delete: value("Com_delete")
      }
    }
  )

const perJob = (counts: SqlCounts, jobs: number) => ({
  statements: round(counts.statements / jobs, 2),
  selects: round(counts.selects / jobs, 2),
  inserts: round(counts.inserts / jobs, 2),
  updates: round(counts.updates / jobs, 2),
  transactionCommits: round(counts.transactionCommits / jobs, 2),
  autocommitWrites: round(counts.autocommitWrites / jobs, 2),
  commits: round(commitsOf(counts) / jobs, 2)
})

/** Statements on `outbox_event` per job since `before`, beyond the create's own INSERT: what moving events costs. */
const outboxPerJob = (counter: SqlCounter, before: ReadonlyMap<string, number>, jobs: number) => {
  let total = 0
  for (const [shape, count] of counter.byStatement()) {
    if (shape.includes("outbox_event") && !shape.startsWith("INSERT")) total += count - (before.get(shape) ?? 0)
  }
  return round(total / jobs, 3)
}

/** Statements per job since `before`, by shape (most frequent first; below 0.01 a job left out). */
const shapesPerJob = (
  counter: SqlCounter,
  before: ReadonlyMap<string, number>,
  jobs: number
): Readonly<Record<string, number>> =>
  Object.fromEntries(
    perJobCounts(
      Array.from(counter.byStatement(), ([shape, total]) => [shape, total - (before.get(shape) ?? 0)] as const),
      jobs
    )
  )

/** Where commit → running goes: the outbox hop (commit → published) and the queue hop (published → locked). */
export interface LatencyBreakdown {
  readonly commitToPublished: LatencySummary
  readonly publishedToRunning: LatencySummary
}

export interface EngineFullLoad {
  readonly jobs: number
  readonly concurrency: number
  readonly createSeconds: number
  readonly createPerSecond: number
  readonly endToEndSeconds: number
  readonly throughputPerSecond: number
  /** Node CPU (user + system) of this process per job, from the first create until every job is terminal. */
  readonly cpuMsPerJob: number
  readonly notSucceeded: number
  readonly commitToRunning: LatencySummary
  readonly commitToSucceeded: LatencySummary
  readonly breakdown: LatencyBreakdown
  readonly sqlTotals: SqlCounts
  /** BEGIN/COMMIT are not listed: they are counted from the transaction spans. */
  readonly statementsPerJobByShape: Readonly<Record<string, number>>
  readonly sqlPerJob: ReturnType<typeof perJob>
  readonly outboxStatementsPerJob: number
  readonly serverStatusPerJob: Readonly<Record<string, number>>
}

export interface EngineHalfLoad {
  readonly targetPerSecond: number
  readonly achievedPerSecond: number
  readonly jobs: number
  readonly notSucceeded: number
  readonly commitToRunning: LatencySummary
  readonly commitToSucceeded: LatencySummary
  readonly breakdown: LatencyBreakdown
  readonly sqlPerJob: ReturnType<typeof perJob>
  readonly outboxStatementsPerJob: number
  readonly statementsPerJobByShape: Readonly<Record<string, number>>
}

/** One producer: each create waits for the previous one (a single client), the engine running meanwhile. */
export interface EngineOneProducer {
  readonly jobs: number
  readonly createPerSecond: number
  readonly commitToRunning: LatencySummary
  readonly breakdown: LatencyBreakdown
  readonly sqlPerJob: ReturnType<typeof perJob>
  readonly outboxStatementsPerJob: number
  readonly statementsPerJobByShape: Readonly<Record<string, number>>
}

/**
 * The engine end to end, in this process: jobs created through `AiJobService.createJob` (no
 * HTTP), dispatched by the real outbox dispatcher into BullMQ and run to `succeeded` by the
 * real worker. Needs the engine (benchEngineLayer) with the dispatcher and worker running.
 */
export const runEngineBench = (options: {
  readonly pool: mysql.Pool
  readonly counter: SqlCounter
  readonly jobs: number
  readonly concurrency: number
  readonly halfLoadSeconds: number
}) =>
  Effect.gen(function*() {
    const service = yield* AiJobService
    const { concurrency, counter, jobs, pool } = options
    // A create that fails is retried, as a client would on a 503, and every failure is counted
    // by kind: a benchmark that hid them would overstate the engine.
    const createFailures = new Map<string, number>()
    const countFailure = (error: { readonly _tag: string; readonly message: string }) =>
      Effect.sync(() => {
        const kind = /ER_LOCK_DEADLOCK|Deadlock/i.test(error.message)
          ? `${error._tag}: deadlock`
          : /ER_LOCK_WAIT_TIMEOUT/i.test(error.message)
          ? `${error._tag}: lock wait timeout`
          : error._tag
        createFailures.set(kind, (createFailures.get(kind) ?? 0) + 1)
      })
    const create = (phase: Phase, index: number) =>
      service.createJob(requestFor(phase, index)).pipe(
        Effect.tapError(countFailure),
        Effect.retry({ times: 5 }),
        Effect.orDie
      )

    // Warm-up (JIT, pools, prepared statements): not measured.
    const warmup = Math.min(200, jobs)
    yield* Effect.forEach(Array.from({ length: warmup }, (_, i) => i), (i) => create("warmup", i), {
      concurrency,
      discard: true
    })
    yield* awaitTerminal(pool, "bench_warmup", warmup, "60 seconds")

    // One producer: creates one after another, as a single client would send them.
    const oneJobs = Math.min(jobs, 500)
    const oneCountsBefore = counter.snapshot()
    const oneShapesBefore = counter.byStatement()
    const oneStart = yield* monoMillis
    for (let i = 0; i < oneJobs; i++) yield* create("one", i)
    const oneEnd = yield* monoMillis
    yield* awaitTerminal(pool, "bench_one", oneJobs, "120 seconds")
    const oneTimes = latencies(yield* jobTimes(pool, "bench_one"))
    const oneProducer: EngineOneProducer = {
      jobs: oneJobs,
      createPerSecond: round(oneJobs / Math.max(0.001, (oneEnd - oneStart) / 1000), 1),
      commitToRunning: oneTimes.toRunning,
      breakdown: oneTimes.breakdown,
      sqlPerJob: perJob(diffCounts(counter.snapshot(), oneCountsBefore), oneJobs),
      outboxStatementsPerJob: outboxPerJob(counter, oneShapesBefore, oneJobs),
      statementsPerJobByShape: shapesPerJob(counter, oneShapesBefore, oneJobs)
    }

    // Full load: every job created as fast as `concurrency` creators go, while the engine runs them.
    const statusBefore = yield* serverStatus(pool)
    const countsBefore = counter.snapshot()
    const shapesBefore = counter.byStatement()
    const startedWall = yield* wallMillis
    const cpuBefore = process.cpuUsage()
    const started = yield* monoMillis
    yield* Effect.forEach(Array.from({ length: jobs }, (_, i) => i), (i) => create("full", i), {
      concurrency,
      discard: true
    })
    const created = yield* monoMillis
    const fullDone = yield* awaitTerminal(pool, "bench_full", jobs, "240 seconds")
    const cpuMsPerJob = cpuMsPerJobSince(cpuBefore, jobs)
    const sqlTotals = diffCounts(counter.snapshot(), countsBefore)
    const statementShapes = shapesPerJob(counter, shapesBefore, jobs)
    const statusAfter = yield* serverStatus(pool)
    const full = latencies(yield* jobTimes(pool, "bench_full"))
    const endToEndSeconds = Math.max(0.001, (full.lastFinished - startedWall) / 1000)
    const throughput = jobs / endToEndSeconds

    const fullLoad: EngineFullLoad = {
      jobs,
      concurrency,
      createSeconds: round((created - started) / 1000, 3),
      createPerSecond: round(jobs / ((created - started) / 1000), 1),
      endToEndSeconds: round(endToEndSeconds, 3),
      throughputPerSecond: round(throughput, 1),
      cpuMsPerJob,
      notSucceeded: fullDone.failed,
      commitToRunning: full.toRunning,
      commitToSucceeded: full.toSucceeded,
      breakdown: full.breakdown,
      sqlTotals,
      sqlPerJob: perJob(sqlTotals, jobs),
      outboxStatementsPerJob: outboxPerJob(counter, shapesBefore, jobs),
      statementsPerJobByShape: statementShapes,
      serverStatusPerJob: Object.fromEntries(
        Object.entries(statusAfter).map((
          [name, value]
        ) => [name, round((value - (statusBefore[name as keyof ServerStatus] ?? 0)) / jobs, 2)])
      )
    }

    // Half load: creation paced at half the measured maximum, one create at a time on schedule.
    const targetPerSecond = Math.max(1, throughput / 2)
    const halfJobs = Math.max(50, Math.round(targetPerSecond * options.halfLoadSeconds))
    const halfCountsBefore = counter.snapshot()
    const halfShapesBefore = counter.byStatement()
    const paceStart = yield* monoMillis
    yield* runPaced(halfJobs, targetPerSecond, (i) => create("half", i))
    const paceEnd = yield* monoMillis
    const halfDone = yield* awaitTerminal(pool, "bench_half", halfJobs, "120 seconds")
    const halfCounts = diffCounts(counter.snapshot(), halfCountsBefore)
    const half = latencies(yield* jobTimes(pool, "bench_half"))
    const halfLoad: EngineHalfLoad = {
      targetPerSecond: round(targetPerSecond, 1),
      achievedPerSecond: round(halfJobs / ((paceEnd - paceStart) / 1000), 1),
      jobs: halfJobs,
      notSucceeded: halfDone.failed,
      commitToRunning: half.toRunning,
      commitToSucceeded: half.toSucceeded,
      breakdown: half.breakdown,
      sqlPerJob: perJob(halfCounts, halfJobs),
      outboxStatementsPerJob: outboxPerJob(counter, halfShapesBefore, halfJobs),
      statementsPerJobByShape: shapesPerJob(counter, halfShapesBefore, halfJobs)
    }
    return { oneProducer, fullLoad, halfLoad, createFailures: Object.fromEntries(createFailures) }
  })
