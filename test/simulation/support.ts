import { Effect } from "effect"
import { describeFailure, runSeeds } from "../../src/simulation/runner.js"

/** Runs a range of seeds and returns the failure report (empty when every seed holds). */
export const failuresIn = (from: number, count: number) =>
  Effect.map(runSeeds(from, count), (summary) => ({
    seeds: summary.seeds,
    wallMs: summary.wallMs,
    report: summary.failures.map((failure) => describeFailure(failure).join("\n")).join("\n\n")
  }))
