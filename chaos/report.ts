import type { CheckReport } from "./checker.js"
import { describeViolations, type Violation } from "./checker.js"
import { faultKinds, type InjectionReport, type Recovery } from "./faults.js"
import { type LoadStats, sentWhileRedisPaused } from "./load.js"
import type { ProviderStats } from "./provider.js"

/** The table a chaos run prints: what was done to the fleet, what became of the jobs, what broke. */

export interface RunSummary {
  readonly header: string
  readonly phases: ReadonlyArray<readonly [string, number]>
  readonly injection: InjectionReport
  readonly load: LoadStats
  readonly provider: ProviderStats
  readonly check: CheckReport
  readonly violations: ReadonlyArray<Violation>
  readonly runProblems: ReadonlyArray<string>
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))] ?? 0

const row = (label: string, value: string | number, note = "") =>
  `  ${label.padEnd(34)} ${String(value).padStart(6)}${note === "" ? "" : `   ${note}`}`

const listOf = (counts: Readonly<Record<string, number>>) =>
  Object.entries(counts).sort(([, a], [, b]) => b - a).map(([key, n]) => `${key} ${n}`).join(", ")

export const recoveryLines = (recoveries: ReadonlyArray<Recovery>): ReadonlyArray<string> =>
  (["kill9", "sigstop", "sigterm", "rolling"] as const).flatMap((kind) => {
    const of = recoveries.filter((r) => r.kind === kind)
    const what = kind === "rolling" ? "rolling restart" : `${kind} of a worker`
    if (of.length === 0) return [row(what, "-", "no job was held at the time")]
    const times = of.flatMap((r) => (r.how === "taken over" && r.ms !== undefined ? [r.ms] : [])).sort((a, b) => a - b)
    const ended = of.filter((r) => r.how === "ended").length
    const never = of.filter((r) => r.how === "never").length
    return [
      row(
        `${what}: jobs held`,
        of.length,
        (times.length === 0
          ? "none taken over"
          : `taken over p50 ${seconds(percentile(times, 0.5))}, max ${seconds(percentile(times, 1))}`) +
          (ended > 0 ? `; ${ended} ended without a new owner` : "") +
          (never > 0 ? `; ${never} never resumed` : "")
      )
    ]
  })

export const formatSummary = (summary: RunSummary): string => {
  const { check, injection, load, provider } = summary
  const injectedByKind = new Map<string, number>()
  for (const fault of injection.injected) injectedByKind.set(fault.kind, (injectedByKind.get(fault.kind) ?? 0) + 1)
  const lines = [
    summary.header,
    `  ${summary.phases.map(([name, ms]) => `${name} ${seconds(ms)}`).join(", ")}`,
    "",
    "faults injected",
    ...faultKinds.map((kind) => row(kind, injectedByKind.get(kind) ?? 0)),
    row(
      "cancel race (cancels sent)",
      load.cancelsSent,
      `${load.cancelsAccepted} accepted, ${load.cancelRefused.length} answered 409`
    ),
    row("MySQL connections killed", injection.killedConnections),
    `  timeline: ${
      injection.injected.map((f) => `+${(f.atMs / 1000).toFixed(0)}s ${f.kind} (${f.target})`).join(", ")
    }`,
    ...injection.skipped.map((s) => row(`skipped ${s.kind}`, 1, s.reason)),
    "",
    "jobs",
    row("created (acknowledged)", load.acknowledged.length, `${load.requested} requested, ${load.gaveUp} given up`),
    row("in the database", check.jobs),
    ...Object.entries(check.jobsByStatus).sort().map(([status, n]) =>
      row(status, n, status === "failed" ? listOf(check.failuresByCode) : "")
    ),
    row("attempts", check.attempts),
    ...(check.retakenWithoutCrash === undefined ? [] : [row(
      "more than one attempt, no crash",
      check.retakenWithoutCrash.jobs,
      `${check.retakenWithoutCrash.handedOff} of them handed off by a SIGTERM (the known defect where a hand-off uses up an attempt)`
    )]),
    "",
    "clients",
    row("HTTP requests", load.requests),
    row("retried after 503", load.retried503),
    row("retried after no answer", load.retriedTransport),
    ...pausedCreatesLines(load, injection),
    row(
      "answered 5xx other than 503",
      load.serverErrors.length,
      listOf(Object.fromEntries(countBy(load.serverErrors)))
    ),
    row(
      "unexpected answers",
      load.unexpected.length,
      listOf(Object.fromEntries(countBy(load.unexpected.map((u) => u.slice(0, 40)))))
    ),
    "",
    "provider",
    row("calls", provider.calls, `by the mode it was in: ${listOf(provider.byMode)}`),
    row("429s", provider.byMode["rateLimited"] ?? 0),
    row("abandoned by the caller", provider.abandoned),
    row("usage rows", check.usageRows, `${provider.calls - check.usageRows} calls without a usage row`),
    "",
    "outbox",
    row("events", Object.values(check.outboxByStatus).reduce((a, b) => a + b, 0), listOf(check.outboxByStatus)),
    row("beyond one per job", check.extraOutboxEvents, "requeues and redispatches"),
    "",
    "recovery (from the fault to another owner or the end)",
    ...recoveryLines(injection.recoveries),
    "",
    `violations: ${summary.violations.length}`,
    ...describeViolations(summary.violations).map((line) => `  ${line}`),
    ...(summary.runProblems.length === 0 ? [] : ["", "run problems:", ...summary.runProblems.map((p) => `  ${p}`)])
  ]
  return lines.join("\n")
}

const countBy = (items: ReadonlyArray<string>) => {
  const counts = new Map<string, number>()
  for (const item of items) counts.set(item, (counts.get(item) ?? 0) + 1)
  return counts
}

/** How the creates sent while Redis was paused (to an API that served all along) were answered. */
const pausedCreatesLines = (load: LoadStats, injection: InjectionReport): ReadonlyArray<string> => {
  const paused = sentWhileRedisPaused(load.createRequests, injection.redisPauses, injection.apiOutages)
  if (paused.length === 0) return [row("creates sent while Redis was paused", 0)]
  const slowest = Math.max(...paused.map((request) => request.ms))
  return [
    row(
      "creates sent while Redis was paused",
      paused.length,
      `slowest answer ${seconds(slowest)}; ${
        listOf(Object.fromEntries(countBy(paused.map((request) => request.answer))))
      }`
    )
  ]
}
