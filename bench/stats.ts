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

/** Counts by key divided by `jobs` (2 decimals), most frequent first; under 0.01 a job left out. */
export const perJobCounts = (
  counts: Iterable<readonly [string, number]>,
  jobs: number
): Array<readonly [string, number]> =>
  Array.from(counts, ([key, n]) => [key, round(n / jobs, 2)] as const)
    .filter(([, perJob]) => perJob >= 0.01)
    .sort((a, b) => b[1] - a[1])

/** `a / b`, rounded; 0 when `b` is 0. */
export const ratio = (a: number, b: number, digits = 3): number => (b === 0 ? 0 : round(a / b, digits))

/** The middle value of `values` (the mean of the two middle ones for an even count; 0 when empty). */
export const median = (values: ReadonlyArray<number>): number => {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2
}

/** One-sided 95 % quantiles of Student's t by degrees of freedom (1..30); 1.645 beyond. */
const studentT95 = [
  6.314,
  2.92,
  2.353,
  2.132,
  2.015,
  1.943,
  1.895,
  1.86,
  1.833,
  1.812,
  1.796,
  1.782,
  1.771,
  1.761,
  1.753,
  1.746,
  1.74,
  1.734,
  1.729,
  1.725,
  1.721,
  1.717,
  1.714,
  1.711,
  1.708,
  1.706,
  1.703,
  1.701,
  1.699,
  1.697
]

export interface MeanBounds {
  readonly mean: number
  /** One-sided 95 % confidence bounds of the mean (Student's t); infinite for fewer than 2 values. */
  readonly lower95: number
  readonly upper95: number
}

/** The mean of `values` and how far it can be at 95 % confidence, for "is the cost below X" claims. */
export const meanWithBounds = (values: ReadonlyArray<number>): MeanBounds => {
  const n = values.length
  const mean = n === 0 ? 0 : values.reduce((sum, v) => sum + v, 0) / n
  if (n < 2) return { mean, lower95: Number.NEGATIVE_INFINITY, upper95: Number.POSITIVE_INFINITY }
  const variance = values.reduce((sum, v) => sum + (v - mean) ** 2, 0) / (n - 1)
  const margin = (studentT95[n - 2] ?? 1.645) * Math.sqrt(variance / n)
  return { mean, lower95: mean - margin, upper95: mean + margin }
}
