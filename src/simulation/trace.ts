import { Cause, HashMap, Logger, LogLevel, Option } from "effect"
import { canonicalJson, sha256Hex } from "../domain/CanonicalJson.js"

/** One line of a simulation's trace: when (virtual ms since the start), at which step, what. */
export interface TraceEntry {
  readonly step: number
  readonly at: number
  readonly kind: string
  readonly detail: Readonly<Record<string, string | number | boolean | null>>
}

/**
 * The record of one run: workload actions, injected faults and every committed lifecycle
 * change, in order. Job ids are replaced by short aliases (J1, J2, ...) in order of first
 * appearance, so traces read well and compare across runs.
 */
export interface Trace {
  readonly record: (kind: string, detail: TraceEntry["detail"]) => void
  readonly setStep: (step: number) => void
  readonly step: () => number
  readonly entries: () => ReadonlyArray<TraceEntry>
  readonly alias: (jobId: string) => string
  /** SHA-256 of the canonical JSON of every entry: equal for equal runs. */
  readonly hash: () => string
}

export const makeTrace = (elapsed: () => number): Trace => {
  const entries: Array<TraceEntry> = []
  const aliases = new Map<string, string>()
  let step = 0
  return {
    record: (kind, detail) => {
      entries.push({ step, at: elapsed(), kind, detail })
    },
    setStep: (next) => {
      step = next
    },
    step: () => step,
    entries: () => entries,
    alias: (jobId) => {
      const known = aliases.get(jobId)
      if (known !== undefined) return known
      const next = `J${aliases.size + 1}`
      aliases.set(jobId, next)
      return next
    },
    hash: () => sha256Hex(canonicalJson(entries))
  }
}

/** One entry as a line of text. */
export const formatEntry = (entry: TraceEntry): string => {
  const seconds = (entry.at / 1000).toFixed(3).padStart(9)
  const fields = Object.entries(entry.detail)
    .map(([key, value]) => `${key}=${String(value)}`)
    .join(" ")
  return `#${String(entry.step).padStart(4)} t=${seconds}s ${entry.kind.padEnd(11)} ${fields}`
}

/**
 * The engine's warnings and errors, as trace entries (message, job alias and process), so a
 * failing seed shows what the engine itself said. Lower levels are dropped.
 */
export const traceLogger = (trace: Trace) =>
  Logger.make(({ annotations, cause, logLevel, message }) => {
    if (!LogLevel.greaterThanEqual(logLevel, LogLevel.Warning)) return
    const text = (Array.isArray(message) ? message : [message]).map((
      part
    ) => (typeof part === "string" ? part : part instanceof Error ? `${part.name}: ${part.message}` : "…")).join(" ")
    const jobId = HashMap.get(annotations, "jobId")
    const workerId = HashMap.get(annotations, "workerId")
    const dispatcherId = HashMap.get(annotations, "dispatcherId")
    const who = Option.orElse(workerId, () => dispatcherId)
    const reason = Cause.isEmpty(cause) ? null : (Cause.pretty(cause).split("\n")[0] ?? "").slice(0, 160)
    trace.record("log", {
      level: logLevel.label,
      message: text.slice(0, 120),
      cause: reason,
      job: Option.match(jobId, {
        onNone: () => null,
        onSome: (id) => (typeof id === "string" ? trace.alias(id) : null)
      }),
      by: Option.match(who, { onNone: () => null, onSome: (id) => (typeof id === "string" ? id : null) })
    })
  })
