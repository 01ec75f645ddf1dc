import type { BullMqBaseline, BullMqPaced } from "./bullmqBaseline.js"
import type { EngineFullLoad, EngineHalfLoad, EngineOneProducer } from "./engine.js"
import type { HttpRun } from "./http.js"
import type { MemoryResult } from "./memory.js"
import type { MysqlBaseline } from "./mysqlBaseline.js"
import { ratio, round } from "./stats.js"

export interface BenchResults {
  readonly startedAt: string
  readonly machine: {
    readonly cpus: number
    readonly node: string
    readonly platform: string
    /** 1-minute load average at start and end: other processes on the machine skew every figure. */
    readonly loadAverageStart: number
    readonly loadAverageEnd: number
  }
  readonly settings: Readonly<Record<string, number | string>>
  readonly bullmq: BullMqBaseline
  readonly mysql: MysqlBaseline
  readonly engine: {
    readonly oneProducer: EngineOneProducer
    readonly fullLoad: EngineFullLoad
    readonly halfLoad: EngineHalfLoad
    readonly createFailures: Readonly<Record<string, number>>
  }
  readonly bullmqHalfLoad: BullMqPaced
  readonly http: { readonly engine: HttpRun; readonly bare: HttpRun; readonly connections: number; readonly seconds: number } | null
  readonly memory: MemoryResult | null
  readonly skipped: ReadonlyArray<string>
  readonly durationSeconds: number
}

export interface Target {
  readonly name: string
  readonly target: string
  readonly value: string
  readonly met: boolean
  /** Why it was missed, from this run's own numbers. */
  readonly note: string
}

export interface Row {
  readonly figure: string
  readonly value: string
  readonly baseline: string
  readonly ratio: string
}

const fmt = (n: number, digits = 1) => round(n, digits).toLocaleString("en-US")

export const targetsOf = (r: BenchResults): ReadonlyArray<Target> => {
  const full = r.engine.fullLoad
  const half = r.engine.halfLoad
  const throughputRatio = ratio(full.throughputPerSecond, r.bullmq.throughputPerSecond)
  // What MySQL alone allows on this machine: the raw create shape commits `transactionsPerSecond`
  // times a second; a job that needs `commits` commits cannot go faster than that divided by them.
  const mysqlCeiling = r.mysql.transactionsPerSecond / Math.max(1, full.sqlPerJob.commits)
  // The outbox and queue hops exist only for jobs a dispatcher published; a creator queues its own.
  const hops = (at: "p50Ms" | "p99Ms") =>
    half.breakdown.commitToPublished.count === 0
      ? "every job was queued by its creator (no outbox hop to split out)"
      : `for the ${half.breakdown.commitToPublished.count} jobs a dispatcher published: outbox hop ${at.slice(0, 3)} ` +
        `${half.breakdown.commitToPublished[at]} ms, queue hop ${half.breakdown.publishedToRunning[at]} ms`
  const targets: Array<Target> = [
    {
      name: "engine throughput ≥ 0.35 × raw BullMQ",
      target: "≥ 0.35",
      value: `${throughputRatio} (${fmt(full.throughputPerSecond)} / ${fmt(r.bullmq.throughputPerSecond)} jobs/s)`,
      met: throughputRatio >= 0.35,
      note: `a job costs ${full.sqlPerJob.statements} SQL statements and ${full.sqlPerJob.commits} commits (raw BullMQ: none); ` +
        `at this machine's raw commit rate (${fmt(r.mysql.transactionsPerSecond)} 2-insert transactions/s) that alone caps the engine at ` +
        `~${fmt(mysqlCeiling)} jobs/s = ${ratio(mysqlCeiling, r.bullmq.throughputPerSecond)} × BullMQ; even 2 commits/job would cap it at ` +
        `${ratio(r.mysql.transactionsPerSecond / 2, r.bullmq.throughputPerSecond)} × BullMQ`
    },
    {
      name: "commit → running p50 ≤ 10 ms at half load",
      target: "≤ 10 ms",
      value: `${half.commitToRunning.p50Ms} ms`,
      met: half.commitToRunning.p50Ms <= 10,
      note: `${hops("p50Ms")}; raw BullMQ add → active p50 ${r.bullmqHalfLoad.addToActive.p50Ms} ms at the same rate`
    },
    {
      name: "commit → running p99 ≤ 50 ms at half load",
      target: "≤ 50 ms",
      value: `${half.commitToRunning.p99Ms} ms`,
      met: half.commitToRunning.p99Ms <= 50,
      note: hops("p99Ms")
    },
    {
      name: "≤ 4 commits per job",
      target: "≤ 4",
      value: `${full.sqlPerJob.commits} (${full.sqlPerJob.transactionCommits} transactions + ${full.sqlPerJob.autocommitWrites} autocommitted writes)`,
      met: full.sqlPerJob.commits <= 4,
      note: "each autocommitted write is its own commit: " +
        Object.entries(full.statementsPerJobByShape).filter(([shape]) => shape.endsWith("[autocommit]"))
          .map(([shape, n]) => `${n} × ${shape.replace(" [autocommit]", "").trim()}`).join(", ") +
        `; plus ${full.sqlPerJob.transactionCommits} transactions (create, project, a share of the outbox claim)`
    }
  ]
  if (r.http !== null) {
    const httpRatio = ratio(r.http.engine.requestsPerSecond, r.http.bare.requestsPerSecond)
    targets.push({
      name: "HTTP ≥ 0.5 × bare handler",
      target: "≥ 0.5",
      value: `${httpRatio} (${fmt(r.http.engine.requestsPerSecond, 0)} / ${fmt(r.http.bare.requestsPerSecond, 0)} req/s)`,
      met: httpRatio >= 0.5,
      note: "per request the API also verifies an HS256 JWT (node:crypto), routes through HttpApi and decodes/encodes Schemas; " +
        "the bare handler does only the SELECTs and JSON.stringify"
    })
  }
  if (r.memory !== null) {
    targets.push({
      name: `worker RSS growth < 10 % (${fmt(r.memory.first.jobs, 0)} → ${fmt(r.memory.second.jobs, 0)} jobs)`,
      target: "< 10 %",
      value: `${r.memory.rssGrowthPercent} % (heap used ${r.memory.heapGrowthPercent} %)`,
      met: r.memory.rssGrowthPercent < 10,
      note: r.memory.scaledDown ? "counts scaled down to fit the time budget (see measured)" : ""
    })
  }
  return targets
}

export const rowsOf = (r: BenchResults): ReadonlyArray<Row> => {
  const full = r.engine.fullLoad
  const half = r.engine.halfLoad
  const bq = r.bullmqHalfLoad.addToActive
  const rows: Array<Row> = [
    { figure: `raw BullMQ: ${fmt(r.bullmq.jobs, 0)} jobs, first add → last completion`, value: `${fmt(r.bullmq.throughputPerSecond)} jobs/s`, baseline: "(baseline)", ratio: "1" },
    { figure: "raw MySQL: BEGIN + 2 INSERT + COMMIT (mysql2)", value: `${fmt(r.mysql.transactionsPerSecond)} tx/s`, baseline: "(baseline)", ratio: "1" },
    { figure: "engine end to end (createJob → succeeded)", value: `${fmt(full.throughputPerSecond)} jobs/s`, baseline: `${fmt(r.bullmq.throughputPerSecond)} BullMQ`, ratio: String(ratio(full.throughputPerSecond, r.bullmq.throughputPerSecond)) },
    { figure: "engine createJob rate (during full load)", value: `${fmt(full.createPerSecond)} jobs/s`, baseline: `${fmt(r.mysql.transactionsPerSecond)} MySQL`, ratio: String(ratio(full.createPerSecond, r.mysql.transactionsPerSecond)) },
    { figure: "engine end to end vs raw MySQL create shape", value: `${fmt(full.throughputPerSecond)} jobs/s`, baseline: `${fmt(r.mysql.transactionsPerSecond)} MySQL`, ratio: String(ratio(full.throughputPerSecond, r.mysql.transactionsPerSecond)) },
    { figure: "full load: commit → running p50 / p99", value: `${full.commitToRunning.p50Ms} / ${full.commitToRunning.p99Ms} ms`, baseline: "", ratio: "" },
    { figure: "full load: commit → succeeded p50 / p99", value: `${full.commitToSucceeded.p50Ms} / ${full.commitToSucceeded.p99Ms} ms`, baseline: "", ratio: "" },
    { figure: `half load (${fmt(half.achievedPerSecond)}/s): commit → running p50 / p99`, value: `${half.commitToRunning.p50Ms} / ${half.commitToRunning.p99Ms} ms`, baseline: `${bq.p50Ms} / ${bq.p99Ms} ms BullMQ add→active`, ratio: `${ratio(half.commitToRunning.p50Ms, Math.max(bq.p50Ms, 0.1), 1)} / ${ratio(half.commitToRunning.p99Ms, Math.max(bq.p99Ms, 0.1), 1)}` },
    { figure: "half load, dispatcher-published jobs: commit → published (outbox hop) p50 / p99", value: `${half.breakdown.commitToPublished.p50Ms} / ${half.breakdown.commitToPublished.p99Ms} ms`, baseline: "", ratio: "" },
    { figure: "half load, dispatcher-published jobs: published → running (queue hop) p50 / p99", value: `${half.breakdown.publishedToRunning.p50Ms} / ${half.breakdown.publishedToRunning.p99Ms} ms`, baseline: "", ratio: "" },
    { figure: "half load: commit → succeeded p50 / p99", value: `${half.commitToSucceeded.p50Ms} / ${half.commitToSucceeded.p99Ms} ms`, baseline: "", ratio: "" },
    { figure: "SQL statements per job (counted)", value: String(full.sqlPerJob.statements), baseline: `${r.mysql.statementsPerTransaction} create shape`, ratio: String(ratio(full.sqlPerJob.statements, r.mysql.statementsPerTransaction, 2)) },
    { figure: "  of which SELECT / INSERT / UPDATE", value: `${full.sqlPerJob.selects} / ${full.sqlPerJob.inserts} / ${full.sqlPerJob.updates}`, baseline: "0 / 2 / 0", ratio: "" },
    { figure: "commits per job (COMMIT + autocommitted writes)", value: `${full.sqlPerJob.commits}`, baseline: `${r.mysql.commitsPerTransaction} create shape`, ratio: String(ratio(full.sqlPerJob.commits, r.mysql.commitsPerTransaction, 2)) },
    ...(["oneProducer", "halfLoad", "fullLoad"] as const).map((phase): Row => {
      const run = r.engine[phase]
      return {
        figure: `statements / commits / outbox statements per job, ${phase === "oneProducer" ? "1 producer" : phase === "halfLoad" ? "half load" : "full load"}`,
        value: `${run.sqlPerJob.statements} / ${run.sqlPerJob.commits} / ${run.outboxStatementsPerJob}`,
        baseline: "≤ 12 / ≤ 3 / ≤ 0.2",
        ratio: ""
      }
    }),
    { figure: `1 producer (${fmt(r.engine.oneProducer.createPerSecond)}/s): commit → running p50 / p99`, value: `${r.engine.oneProducer.commitToRunning.p50Ms} / ${r.engine.oneProducer.commitToRunning.p99Ms} ms`, baseline: "", ratio: "" },
    { figure: "  cross-check, server-wide: Questions / Com_commit per job", value: `${full.serverStatusPerJob["Questions"] ?? 0} / ${full.serverStatusPerJob["Com_commit"] ?? 0}`, baseline: "", ratio: "" }
  ]
  if (r.http !== null) {
    rows.push({
      figure: `HTTP GET /api/ai/jobs/:jobId (${r.http.connections} conns, ${r.http.seconds} s)`,
      value: `${fmt(r.http.engine.requestsPerSecond, 0)} req/s (p99 ${r.http.engine.latencyP99Ms} ms)`,
      baseline: `${fmt(r.http.bare.requestsPerSecond, 0)} bare (p99 ${r.http.bare.latencyP99Ms} ms)`,
      ratio: String(ratio(r.http.engine.requestsPerSecond, r.http.bare.requestsPerSecond))
    })
  }
  if (r.memory !== null) {
    const m = r.memory
    rows.push(
      { figure: `worker RSS after ${fmt(m.first.jobs, 0)} jobs`, value: `${m.first.rssMb} MB (heap ${m.first.heapUsedMb} MB)`, baseline: `${m.start.rssMb} MB idle`, ratio: String(ratio(m.first.rssMb, m.start.rssMb)) },
      { figure: `worker RSS after ${fmt(m.second.jobs, 0)} jobs`, value: `${m.second.rssMb} MB (heap ${m.second.heapUsedMb} MB)`, baseline: `${m.first.rssMb} MB at ${fmt(m.first.jobs, 0)}`, ratio: String(ratio(m.second.rssMb, m.first.rssMb)) }
    )
  }
  return rows
}

const pad = (text: string, width: number) => text + " ".repeat(Math.max(0, width - text.length))

export const renderTable = (rows: ReadonlyArray<Row>): string => {
  const header: Row = { figure: "figure", value: "value", baseline: "baseline (same run)", ratio: "ratio" }
  const all = [header, ...rows]
  const widths = {
    figure: Math.max(...all.map((row) => row.figure.length)),
    value: Math.max(...all.map((row) => row.value.length)),
    baseline: Math.max(...all.map((row) => row.baseline.length))
  }
  const line = (row: Row) =>
    `${pad(row.figure, widths.figure)} | ${pad(row.value, widths.value)} | ${pad(row.baseline, widths.baseline)} | ${row.ratio}`
  return [line(header), "-".repeat(widths.figure + widths.value + widths.baseline + 14), ...rows.map(line)].join("\n")
}

export const renderReport = (r: BenchResults): string => {
  const targets = targetsOf(r)
  const lines = [
    "",
    `AI job engine benchmark: ${r.machine.cpus} CPUs, Node ${r.machine.node}, ${r.durationSeconds} s, ` +
    `load average ${r.machine.loadAverageStart} at start, ${r.machine.loadAverageEnd} at end` +
    (Math.max(r.machine.loadAverageStart, r.machine.loadAverageEnd) > r.machine.cpus ? " (machine busy with other work: figures are noisy)" : ""),
    `N = ${r.bullmq.jobs} jobs, concurrency ${r.bullmq.concurrency} (producers, worker, creators, HTTP connections)`,
    "",
    renderTable(rowsOf(r)),
    "",
    "Targets:",
    ...targets.map((t) => `  [${t.met ? "MET" : "MISSED"}] ${t.name}: ${t.value}${t.met || t.note === "" ? "" : `\n           why: ${t.note}`}`)
  ]
  lines.push(
    "",
    "SQL statements per job at full load, by shape (BEGIN/COMMIT not listed):",
    ...Object.entries(r.engine.fullLoad.statementsPerJobByShape).map(([shape, n]) => `  ${String(n).padStart(5)}  ${shape}`)
  )
  const failures = Object.entries(r.engine.createFailures)
  if (failures.length > 0) {
    lines.push(
      "",
      `createJob failures (retried by the bench, like a client retrying a 503): ${failures.map(([k, v]) => `${k} × ${v}`).join(", ")}`
    )
  }
  if (r.engine.fullLoad.notSucceeded + r.engine.halfLoad.notSucceeded > 0) {
    lines.push(`jobs that did not succeed: ${r.engine.fullLoad.notSucceeded} (full load), ${r.engine.halfLoad.notSucceeded} (half load)`)
  }
  if (r.memory !== null) lines.push("", `memory: ${r.memory.measured}`)
  for (const skipped of r.skipped) lines.push(`skipped: ${skipped}`)
  return lines.join("\n")
}
