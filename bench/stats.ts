/** Nearest-rank percentile of `values` (0 when empty); `p` in 0..100. */
export const percentile = (values: ReadonlyArray<number>, p: number): number => {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)))
  return sorted[rank - 1] ?? 0
}

export interface LatencySummary {
  readonly count: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
}

export const summarize = (values: ReadonlyArray<number>): LatencySummary => ({
  count: values.length,
  p50Ms: round(percentile(values, 50), 1),
  p99Ms: round(percentile(values, 99), 1),
  maxMs: round(values.reduce((max, v) => Math.max(max, v), 0), 1)
})

export const round = (value: number, digits = 2): number => {
  const factor = 10 ** digits
  return Math.round(value * factor) / factor
}

/** `a / b`, rounded; 0 when `b` is 0. */
export const ratio = (a: number, b: number, digits = 3): number => (b === 0 ? 0 : round(a / b, digits))

/** The middle value of `values` (the mean of the two middle ones for an even count; 0 when empty). */
export const median = (values: ReadonlyArray<number>): number => {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2
}
