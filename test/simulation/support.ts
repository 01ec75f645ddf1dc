import { Effect } from "effect"
import { describeFailure, runSeeds } from "../../src/simulation/runner.js"

/** Runs a range of seeds and returns the failure report (empty when every seed holds). */
export const failuresIn = (from: number, count: number) =>
  Effect.map(runSeeds(from, count), (summary) => ({
    seeds: summary.seeds,
    wallMs: summary.wallMs,
    report: summary.failures.map((failure) => describeFailure(failure).join("\n")).join("\n\n")
  }))

/**
 * Seeds `from` .. `from + count - 1` in consecutive chunks of `size`: a test per chunk keeps each
 * test's time (and its timeout) modest on a loaded machine, and names the chunk that failed.
 */
export const seedChunks = (from: number, count: number, size: number) =>
  Array.from({ length: Math.ceil(count / size) }, (_, index) => {
    const first = from + index * size
    return { from: first, count: Math.min(size, from + count - first) }
  })
