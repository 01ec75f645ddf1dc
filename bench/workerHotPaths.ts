/**
 * `npx tsx bench/workerHotPaths.ts`: micro benches of constructions on the worker's per-job path,
 * each as it was and as it is now, run in turn in one process (`HOT_PATH_ROUNDS` rounds of
 * `HOT_PATH_CALLS` calls each); prints each one's CPU µs per call, median over the rounds, and
 * the ratio. Figures for the commit that made the change, not a test.
 */
import { Duration, Effect, Metric } from "effect"
import { stageSpan } from "../src/pipeline/stageSpan.js"
import { stageDuration, tagged, timed } from "../src/services/EngineMetrics.js"
import { cpuMicros } from "./procStat.js"
import { median, round } from "./stats.js"

const calls = Number(process.env["HOT_PATH_CALLS"] ?? 20_000)
const rounds = Number(process.env["HOT_PATH_ROUNDS"] ?? 9)

interface HotPath {
  readonly name: string
  /** One call's worth of work, as an effect run with `Effect.runSync`. */
  readonly before: () => Effect.Effect<unknown>
  readonly after: () => Effect.Effect<unknown>
}

const annotate = Effect.annotateLogs({ stage: "BENCH" })

/** A stage as `Effect.fn` made it: a span, and an Error per call for a stack the span does not keep. */
const stageWithFn = Effect.fn("pipeline.bench", { captureStackTrace: false })(
  function*(n: number) {
    return yield* Effect.succeed(n + 1)
  },
  annotate
)
const stageWithFnUntraced = Effect.fnUntraced(
  function*(n: number) {
    return yield* Effect.succeed(n + 1)
  },
  annotate,
  stageSpan("pipeline.bench")
)

/** `timed` as it was: the stage's metric tagged (a label-set lookup) and mapped on every call. */
const timedPerCall =
  (metric: Metric.Metric.Histogram<number>, labels: Readonly<Record<string, string>>) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Metric.trackDuration(effect, Metric.mapInput(tagged(metric, labels), Duration.toSeconds))
const stageTimedPerCall = timedPerCall(stageDuration, { stage: "bench" })
const stageTimedOnce = timed(stageDuration, { stage: "bench" })

const hotPaths: ReadonlyArray<HotPath> = [
  {
    name: "a stage's span: Effect.fn → Effect.fnUntraced + stageSpan",
    before: () => stageWithFn(1),
    after: () => stageWithFnUntraced(1)
  },
  {
    name: "a stage's duration metric: tagged and mapped per call → once",
    before: () => stageTimedPerCall(Effect.void),
    after: () => stageTimedOnce(Effect.void)
  }
]

const timeCalls = (make: () => Effect.Effect<unknown>) => {
  // One effect of `calls` runs in a row: the runtime's own start-up is paid once per round.
  const all = Effect.forEach(Array.from({ length: calls }), make, { discard: true })
  const started = cpuMicros()
  Effect.runSync(all)
  return (cpuMicros() - started) / calls
}

for (const path of hotPaths) {
  timeCalls(path.before)
  timeCalls(path.after)
  const before: Array<number> = []
  const after: Array<number> = []
  for (let i = 0; i < rounds; i++) {
    before.push(timeCalls(path.before))
    after.push(timeCalls(path.after))
  }
  const b = median(before)
  const a = median(after)
  console.log(`${path.name}: ${round(b, 2)} → ${round(a, 2)} µs CPU per call (× ${round(a / b, 2)})`)
}
