/**
 * `npm run simulate -- --seeds N [--from F]` runs seeds F .. F+N-1 of the deterministic
 * simulation (the whole engine on memory layers, a simulated clock, seeded workload and faults,
 * invariants after every step) and exits non-zero if any seed breaks an invariant.
 * `npm run simulate -- --seed S [--trace]` replays one seed: the same seed gives the same trace
 * (its SHA-256 is printed) on every run. `--unsafe-disable-fencing` switches on the deliberate
 * bug of the memory store, to watch the simulator catch it.
 */
import { Command, Options } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { defaultTeardown, type Teardown } from "@effect/platform/Runtime"
import { Console, Effect, Option, Schema } from "effect"
import { describeFailure, runSeed, runSeeds, type SeedResult } from "../simulation/runner.js"
import { formatEntry } from "../simulation/trace.js"

class SimulationFailed extends Schema.TaggedError<SimulationFailed>()("SimulationFailed", {
  failures: Schema.Number
}) {}

const seedOption = Options.integer("seed").pipe(Options.optional, Options.withDescription("Replay this one seed."))
const seedsOption = Options.integer("seeds").pipe(
  Options.withDefault(100),
  Options.withDescription("How many seeds to run.")
)
const fromOption = Options.integer("from").pipe(
  Options.withDefault(1),
  Options.withDescription("The first seed of --seeds.")
)
const traceOption = Options.boolean("trace").pipe(Options.withDescription("With --seed: print the whole trace."))
const unfencedOption = Options.boolean("unsafe-disable-fencing").pipe(
  Options.withDescription("Switch on the deliberate bug (lease guard skipped in the memory store).")
)
const stopOption = Options.boolean("stop-on-failure").pipe(
  Options.withDescription("With --seeds: stop at the first failing seed.")
)

const summaryOf = (result: SeedResult) =>
  `seed ${result.seed}: ${result.ok ? "ok" : "FAILED"}  trace ${result.traceHash}  ` +
  `${result.steps} steps, ${result.traceLength} entries, ${result.jobs} jobs ${JSON.stringify(result.outcomes)}, ` +
  `${(result.virtualMs / 1000).toFixed(1)} s simulated`

const one = (seed: number, trace: boolean, unsafeDisableFencing: boolean) =>
  Effect.gen(function*() {
    const result = yield* runSeed(seed, { unsafeDisableFencing }, { keepEntries: trace ? Infinity : 30 })
    if (trace) { for (const entry of result.lastEntries) yield* Console.log(formatEntry(entry)) }
    yield* Console.log(summaryOf(result))
    if (!result.ok) {
      yield* Console.error(describeFailure(result).join("\n"))
      return yield* new SimulationFailed({ failures: 1 })
    }
  })

const many = (from: number, count: number, stopAtFirstFailure: boolean, unsafeDisableFencing: boolean) =>
  Effect.gen(function*() {
    yield* Console.log(
      `simulating seeds ${from} .. ${from + count - 1}${
        unsafeDisableFencing ? " with fencing DISABLED (deliberate bug)" : ""
      }`
    )
    const summary = yield* runSeeds(from, count, {
      overrides: { unsafeDisableFencing },
      stopAtFirstFailure,
      onResult: (result) =>
        Effect.gen(function*() {
          if (!result.ok) yield* Console.error(describeFailure(result).join("\n"))
          else if ((result.seed - from + 1) % 100 === 0) yield* Console.log(`  ... ${result.seed - from + 1} seeds`)
        })
    })
    const perSeed = summary.wallMs / Math.max(1, summary.seeds)
    yield* Console.log(
      `${summary.seeds} seeds, ${summary.failures.length} failed, ${(summary.wallMs / 1000).toFixed(1)} s ` +
        `(${perSeed.toFixed(0)} ms per seed, ${(1000 / perSeed).toFixed(1)} seeds/s)`
    )
    if (summary.failures.length > 0) {
      yield* Console.error(`failing seeds: ${summary.failures.map((f) => f.seed).join(", ")}`)
      return yield* new SimulationFailed({ failures: summary.failures.length })
    }
  })

const simulate = Command.make(
  "simulate",
  {
    seed: seedOption,
    seeds: seedsOption,
    from: fromOption,
    trace: traceOption,
    unsafeDisableFencing: unfencedOption,
    stopOnFailure: stopOption
  },
  ({ from, seed, seeds, stopOnFailure, trace, unsafeDisableFencing }) =>
    Option.match(seed, {
      onSome: (single) => one(single, trace, unsafeDisableFencing),
      onNone: () => many(from, seeds, stopOnFailure, unsafeDisableFencing)
    })
)

const cli = Command.run(simulate, { name: "simulate", version: "0.1.0" })

/**
 * The run is over once its report is printed: exit then, with its code. A seed's world can
 * leave fibers of "killed" processes parked for good (as a real kill -9 would leave their
 * deliveries), and they must not keep the process alive.
 */
const exitWhenDone: Teardown = (exit, onExit) =>
  defaultTeardown(exit, (code) => {
    onExit(code)
    process.exit(code)
  })

cli(process.argv).pipe(
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain({ disableErrorReporting: true, teardown: exitWhenDone })
)
