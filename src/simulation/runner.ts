import {
  Clock,
  ConfigProvider,
  Duration,
  Effect,
  Exit,
  FiberRef,
  HashMap,
  HashSet,
  Random,
  Scheduler,
  Scope
} from "effect"
import { circuitBreakerDefaults } from "../config/CircuitBreakerSettings.js"
import type { TimingConfig } from "../config/EngineConfig.js"
import { queueDefaults } from "../config/QueueSettings.js"
import { isTerminal } from "../domain/LifecycleStatus.js"
import { feynmanEvaluationDefinition } from "../jobs/feynman_evaluation/definition.js"
import { flashcardGenerationDefinition } from "../jobs/flashcard_generation/definition.js"
import { syntheticEchoDefinition } from "../jobs/synthetic_echo/definition.js"
import { makeSimulatedClock } from "./clock.js"
import {
  type FaultSettings,
  generateCreatorCrashes,
  generateExtendedFaults,
  generateFailoverFaults,
  generateFaults
} from "./faults.js"
import { invariantNames, makeMonitor, type Violation } from "./invariants.js"
import type { PlantedBug } from "./plantedBugs.js"
import { makeSimulationScheduler } from "./scheduler.js"
import { sealedEchoDefinition } from "./sealedEcho.js"
import { formatEntry, makeTrace, type TraceEntry, traceLogger } from "./trace.js"
import {
  defaultWorkloadSettings,
  generateExtendedWorkload,
  generateFailoverWorkload,
  generateWorkload,
  type WorkloadSettings
} from "./workload.js"
import { failoverWorld, makeWorld, platformKeysOf, simulationProviderLimits, type WorldSettings } from "./world.js"

/** Everything one run depends on besides its seed. */
export interface SimulationSettings {
  readonly workers: number
  readonly dispatchers: number
  readonly reapers: number
  readonly timing: TimingConfig["Type"]
  readonly dispatcherReleaseInterval: Duration.Duration
  readonly providerLatency: { readonly min: Duration.Duration; readonly max: Duration.Duration }
  /** The fault phase: workload and faults happen within it; then a fault-free tail. */
  readonly phaseMs: number
  /** A step of the fault phase advances the clock at most this far. */
  readonly tickMs: number
  readonly tailTickMs: number
  readonly workload: Omit<WorkloadSettings, "phaseMs">
  readonly faults: Omit<FaultSettings, "phaseMs" | "workers" | "dispatchers" | "minPauseMs">
  readonly unsafeDisableFencing: boolean
  /** A deliberate bug to plant (see `plantedBugs.ts`), to watch an invariant catch it; `null` for the real engine. */
  readonly plantedBug: PlantedBug | null
  /**
   * Whether creates add their own jobs to the queue, the dispatchers
   * sweeping what a creator that crashed after its commit left. Unset: on even seeds of the real
   * engine; a planted bug (or fencing off) runs on the dispatcher path, where it was proven.
   */
  readonly creatorAdds?: boolean | undefined
  /**
   * The faults and workload added after seeds 1-500 were settled, each from its own `Random` so
   * those seeds replay as before: rolling restarts (hand-offs, chained onto stopping workers),
   * a worker frozen in PROJECT, credential refusals, bursts of creates meeting hanging calls
   * (the provider's concurrency limit binds), cancels of burst jobs while they run, and jobs whose
   * snapshot differs from their input. Unset: on seeds from `firstExtendedSeed`.
   */
  readonly extendedFaults?: boolean | undefined
  /**
   * The failover world, added after seeds 1-560 were settled and drawn from random streams of
   * its own: two providers with their own platform keys and a route `deepseek → backup`, a user
   * on a key of their own, outages of a provider with a stream of creates through each, the
   * circuit breakers' store and each run's admissions watched (see `WorldSettings.failover`).
   * Unset: on seeds from `firstFailoverSeed`.
   */
  readonly failover?: boolean | undefined
}

/** The first seed that runs the extended faults by default (see `SimulationSettings.extendedFaults`). */
export const firstExtendedSeed = 501

/** The first seed that runs the failover world by default (see `SimulationSettings.failover`). */
export const firstFailoverSeed = 801

/** The grace before a dispatcher sweeps an event a creator adds itself. */
const creatorGrace = Duration.millis(5_000)

export const defaultSimulationSettings: SimulationSettings = {
  workers: 3,
  dispatchers: 2,
  reapers: 2,
  timing: {
    jobLockTtl: Duration.millis(20_000),
    jobHeartbeatInterval: Duration.millis(5_000),
    reaperGrace: Duration.millis(5_000),
    reaperInterval: Duration.millis(5_000),
    queuedRedispatchAfter: Duration.millis(15_000),
    outboxLockTtl: Duration.millis(15_000),
    outboxPollInterval: Duration.millis(1_000),
    snapshotRetention: Duration.millis(7 * 24 * 60 * 60 * 1000)
  },
  dispatcherReleaseInterval: Duration.millis(5_000),
  providerLatency: { min: Duration.millis(50), max: Duration.millis(2_000) },
  phaseMs: 60_000,
  tickMs: 1_000,
  tailTickMs: 2_000,
  workload: {
    jobs: defaultWorkloadSettings.jobs,
    users: defaultWorkloadSettings.users,
    cancels: defaultWorkloadSettings.cancels,
    adminRetries: defaultWorkloadSettings.adminRetries,
    duplicateRate: defaultWorkloadSettings.duplicateRate
  },
  faults: {
    workerCrashes: 3,
    dispatcherCrashes: 1,
    pauses: 1,
    providerTroubles: 4,
    queueOutages: 1,
    databaseFaultWindows: 1,
    duplicateDeliveries: 3
  },
  unsafeDisableFencing: false,
  plantedBug: null
}

/** The definitions of the simulated job types (their timeouts and backoffs bound the checks). */
const definitions = [
  syntheticEchoDefinition,
  flashcardGenerationDefinition,
  feynmanEvaluationDefinition,
  sealedEchoDefinition
] as const

/** How long after an honoured cancel a run's calls may go on: the cancel message stops them at once, a beat within one interval. */
const cancelStopMs = (timing: TimingConfig["Type"]) => 2 * Duration.toMillis(timing.jobHeartbeatInterval)

/** The timers the liveness bound adds up, in milliseconds. */
const timingMillis = (timing: TimingConfig["Type"]) => ({
  jobLockTtlMs: Duration.toMillis(timing.jobLockTtl),
  reaperGraceMs: Duration.toMillis(timing.reaperGrace),
  reaperIntervalMs: Duration.toMillis(timing.reaperInterval),
  queuedRedispatchMs: Duration.toMillis(timing.queuedRedispatchAfter),
  outboxLockTtlMs: Duration.toMillis(timing.outboxLockTtl),
  outboxPollMs: Duration.toMillis(timing.outboxPollInterval)
})

/** A pause this long loses the paused worker's lock: the lock TTL, the reaper's grace and one reaper interval. */
const lostLockMs = (timing: TimingConfig["Type"]) => {
  const { jobLockTtlMs, reaperGraceMs, reaperIntervalMs } = timingMillis(timing)
  return jobLockTtlMs + reaperGraceMs + reaperIntervalMs
}

/** The longest a Retry-After from the simulated provider asks for (see `faults.ts`). */
const maxRetryAfterMs = 6_000

/**
 * How long after the faults stop every job must be terminal. Each term is one way a job can
 * still be held up when the tail starts, taken at its worst:
 * - a lost lock: the lock TTL, then the reaper's grace, then up to one reaper interval;
 * - a lost delivery of a queued job: the requeue age, then up to one reaper interval;
 * - a lost outbox claim: the outbox lock TTL, then up to one release interval, then one poll;
 * - a delivery the queue took back: its longest redelivery backoff;
 * - the run itself: the longest timeout, then the longest jittered backoff (or Retry-After; with
 *   several providers, the longest a breaker stays open), then one provider call.
 */
export const livenessBoundMs = (settings: SimulationSettings, failover = false): number => {
  const timing = timingMillis(settings.timing)
  // A route whose every target's breaker is open asks to be retried when the first may probe.
  const retryAfterMs = failover
    ? Math.max(maxRetryAfterMs, Duration.toMillis(circuitBreakerDefaults.maxOpenDuration))
    : maxRetryAfterMs
  const lostLock = timing.jobLockTtlMs + timing.reaperGraceMs + timing.reaperIntervalMs
  const lostDelivery = timing.queuedRedispatchMs + timing.reaperIntervalMs
  const lostClaim = timing.outboxLockTtlMs + Duration.toMillis(settings.dispatcherReleaseInterval) + timing.outboxPollMs
  const redelivery = Math.max(
    ...Object.values(queueDefaults).map((queue) => Duration.toMillis(queue.backoffDelay) * 2 ** (queue.attempts - 1))
  )
  const execution = Math.max(
    ...definitions.map((definition) =>
      definition.execution.timeoutMs +
      Math.max(
        retryAfterMs,
        1.2 * definition.execution.retryBackoff.delay * 2 ** (definition.execution.maxRetries - 1)
      ) +
      Duration.toMillis(settings.providerLatency.max)
    )
  )
  // An event a crashed creator never added waits out its grace before a dispatcher may take it.
  return lostLock + lostDelivery + lostClaim + Duration.toMillis(creatorGrace) + redelivery + execution
}

/** The extended workload and faults of a seed, when it runs them (none otherwise). */
const planExtended = (seed: number, settings: SimulationSettings) =>
  Effect.gen(function*() {
    if (!(settings.extendedFaults ?? seed >= firstExtendedSeed)) return { workload: [], faults: [] }
    const { actions: workload, burstsAt } = yield* generateExtendedWorkload({
      phaseMs: settings.phaseMs,
      users: settings.workload.users
    }).pipe(
      Effect.withRandom(Random.make(`extended-workload:${seed}`))
    )
    const faults = yield* generateExtendedFaults({
      phaseMs: settings.phaseMs,
      workers: settings.workers,
      minPauseMs: lostLockMs(settings.timing),
      burstsAt
    }).pipe(Effect.withRandom(Random.make(`extended-faults:${seed}`)))
    return { workload, faults }
  })

/** The failover workload and faults of a seed. */
const planFailover = (seed: number, settings: SimulationSettings) =>
  Effect.gen(function*() {
    const faults = yield* generateFailoverFaults({
      phaseMs: settings.phaseMs,
      providers: [failoverWorld.primary, failoverWorld.backup]
    }).pipe(Effect.withRandom(Random.make(`failover-faults:${seed}`)))
    const workload = yield* generateFailoverWorkload({ users: settings.workload.users, outages: faults }).pipe(
      Effect.withRandom(Random.make(`failover-workload:${seed}`))
    )
    return { workload, faults }
  })

/** The least gap between two provider calls of one lease: the schedule's first delay, jittered down (x0.8). */
const minRetryGapMs = (): Readonly<Record<string, number>> =>
  Object.fromEntries(
    definitions.map((definition) => [definition.jobType, Math.floor(0.8 * definition.execution.retryBackoff.delay) - 1])
  )

export interface SeedResult {
  readonly seed: number
  readonly ok: boolean
  readonly violation: Violation | undefined
  readonly traceHash: string
  readonly steps: number
  readonly jobs: number
  readonly commits: number
  readonly traceLength: number
  /** The last entries of the trace (all of them when asked). */
  readonly lastEntries: ReadonlyArray<TraceEntry>
  readonly virtualMs: number
  readonly outcomes: Readonly<Record<string, number>>
}

/** Virtual time starts here (2025-01-01T00:00:00Z), so ids and timestamps are the same every run. */
const epochMillis = 1_735_689_600_000

/**
 * A seed runs on microtasks only, so seeds run back to back would never let the host's event
 * loop turn (its I/O, its timers: a test runner's RPC times out). Each seed first yields to it.
 */
const yieldToEventLoop = Effect.yieldNow().pipe(Effect.withScheduler(Scheduler.timer(0)))

/** One seed: plan the workload and faults, run the world step by step, check after each step. */
export const runSeed = (
  seed: number,
  overrides: Partial<SimulationSettings> = {},
  options: { readonly keepEntries?: number } = {}
) => {
  const settings: SimulationSettings = { ...defaultSimulationSettings, ...overrides }
  const failover = settings.failover ?? seed >= firstFailoverSeed
  const clock = makeSimulatedClock({ startMillis: epochMillis })
  const elapsed = () => clock.now() - epochMillis
  const trace = makeTrace(elapsed)
  const monitor = makeMonitor({
    minRetryGapMs: minRetryGapMs(),
    cancellable: new Set(
      definitions.filter((definition) => definition.execution.cancellable).map((definition) => definition.jobType)
    ),
    reaperGraceMs: Duration.toMillis(settings.timing.reaperGrace),
    now: clock.now,
    trace,
    concurrencyLimits: Object.fromEntries(
      Object.entries(failover ? failoverWorld.providerLimits : simulationProviderLimits).map((
        [providerModel, limit]
      ) => [
        providerModel,
        limit.concurrency
      ])
    ),
    cancelStopMs: cancelStopMs(settings.timing),
    platformKeys: platformKeysOf(failover),
    failover: failover
      ? {
        breakers: circuitBreakerDefaults,
        route: failoverWorld.route,
        timeoutMs: Object.fromEntries(
          definitions.map((definition) => [definition.jobType, definition.execution.timeoutMs])
        )
      }
      : undefined
  })
  const keep = options.keepEntries ?? 30

  const program = Effect.gen(function*() {
    const workload = yield* generateWorkload({ ...settings.workload, phaseMs: settings.phaseMs }).pipe(
      Effect.withRandom(Random.make(`workload:${seed}`))
    )
    const faults = yield* generateFaults({
      ...settings.faults,
      phaseMs: settings.phaseMs,
      workers: settings.workers,
      dispatchers: settings.dispatchers,
      minPauseMs: lostLockMs(settings.timing)
    }).pipe(Effect.withRandom(Random.make(`faults:${seed}`)))
    const creatorAdds = settings.creatorAdds ??
      (settings.plantedBug === null && !settings.unsafeDisableFencing && seed % 2 === 0)
    const creatorCrashes = creatorAdds
      ? yield* generateCreatorCrashes({ phaseMs: settings.phaseMs, windows: 2 }).pipe(
        Effect.withRandom(Random.make(`creator-faults:${seed}`))
      )
      : []
    const extended = yield* planExtended(seed, settings)
    // Not even planned where it does not run: seeds before it replay step for step as they did.
    const failoverPlan = failover ? yield* planFailover(seed, settings) : { workload: [], faults: [] }

    const worldSettings: WorldSettings = {
      seed: String(seed),
      workers: settings.workers,
      dispatchers: settings.dispatchers,
      reapers: settings.reapers,
      timing: settings.timing,
      dispatcherReleaseInterval: settings.dispatcherReleaseInterval,
      providerLatency: settings.providerLatency,
      unsafeDisableFencing: settings.unsafeDisableFencing,
      plantedBug: settings.plantedBug,
      creatorAdds: creatorAdds ? { grace: creatorGrace } : null,
      failover
    }
    const world = yield* makeWorld({ settings: worldSettings, trace, monitor, now: elapsed })
    world.setDeliveryFaults(faults.delivery)
    trace.record("plan", {
      creates: [...workload, ...extended.workload, ...failoverPlan.workload].filter((a) => a._tag === "Create").length,
      faults: [...faults.actions, ...creatorCrashes, ...extended.faults, ...failoverPlan.faults].map((a) => a._tag)
        .join(","),
      delayRate: faults.delivery.delayRate,
      duplicateRate: faults.delivery.duplicateRate
    })
    for (const action of [...workload, ...extended.workload, ...failoverPlan.workload]) {
      world.schedule(action.at, action._tag, world.applyWorkload(action))
    }
    for (const action of [...faults.actions, ...creatorCrashes, ...extended.faults, ...failoverPlan.faults]) {
      world.schedule(action.at, action._tag, world.applyFault(action))
    }

    let step = 0
    const check = Effect.gen(function*() {
      monitor.checkState(yield* world.db.snapshot)
      return monitor.violation() === undefined
    })
    const nextStep = () => {
      step += 1
      trace.setStep(step)
    }
    /** Moves the clock to `target` in ticks, checking after each. */
    const advance = (target: number, tickMs: number) =>
      Effect.gen(function*() {
        while (elapsed() < target) {
          nextStep()
          yield* clock.advanceTo(epochMillis + Math.min(target, elapsed() + tickMs))
          if (!(yield* check)) return false
        }
        return true
      })
    /** Runs the agenda up to `until`. */
    const runAgenda = (until: number, tickMs: number) =>
      Effect.gen(function*() {
        while (world.agenda.length > 0 && world.agenda[0]!.at <= until) {
          const item = world.agenda.shift()!
          if (!(yield* advance(item.at, tickMs))) return false
          nextStep()
          yield* item.run.pipe(
            Effect.catchAllCause((cause) =>
              Effect.sync(() => trace.record("action-error", { label: item.label, cause: String(cause) }))
            )
          )
          yield* clock.settle
          if (!(yield* check)) return false
        }
        return yield* advance(until, tickMs)
      })

    const faultPhaseOk = yield* runAgenda(settings.phaseMs, settings.tickMs)
    if (faultPhaseOk) {
      nextStep()
      yield* world.endFaults
      yield* world.replayDeadEvents
      yield* clock.settle
      const tailStart = elapsed()
      const bound = livenessBoundMs(settings, failover)
      while (monitor.violation() === undefined) {
        const tables = yield* world.db.snapshot
        const open = Array.from(HashMap.values(tables.aiJob)).filter((job) => !isTerminal(job.lifecycleStatus))
        const unsettled = Array.from(HashMap.values(tables.outboxEvent)).filter((e) =>
          e.status !== "published" && e.status !== "dead"
        )
        if (open.length === 0 && unsettled.length === 0) break
        if (elapsed() - tailStart >= bound) {
          if (open.length > 0) {
            const described: Array<string> = []
            for (const job of open) {
              const entries = yield* world.queueEntriesOf(job)
              described.push(
                `${trace.alias(job.id)} is ${job.lifecycleStatus} (attempt ${job.attemptCount}/${job.maxAttempts}, ` +
                  `lock ${
                    job.lockUntil === null ? "none" : `until ${job.lockUntil.getTime() - epochMillis} ms`
                  }, ${entries} queue entries)`
              )
            }
            monitor.fail(invariantNames.liveness, `${bound} ms after the faults stopped, ${described.join("; ")}`)
          } else monitor.checkSettled(tables)
          break
        }
        if (!(yield* runAgenda(elapsed() + settings.tailTickMs, settings.tailTickMs))) break
      }
      if (monitor.violation() === undefined) monitor.checkSettled(yield* world.db.snapshot)
    }
    const tables = yield* world.db.snapshot
    const outcomes: Record<string, number> = {}
    for (const job of HashMap.values(tables.aiJob)) {
      outcomes[job.lifecycleStatus] = (outcomes[job.lifecycleStatus] ?? 0) + 1
    }
    yield* world.shutdown
    const entries = trace.entries()
    const violation = monitor.violation()
    return {
      seed,
      ok: violation === undefined,
      violation,
      traceHash: trace.hash(),
      steps: step,
      jobs: HashMap.size(tables.aiJob),
      commits: monitor.commits(),
      traceLength: entries.length,
      lastEntries: keep === Infinity ? entries : entries.slice(-keep),
      virtualMs: elapsed(),
      outcomes
    } satisfies SeedResult
  })

  // The world's scope is closed in the background: closing it may wait on fibers that need
  // simulated time, which no longer moves once the run is over.
  const scoped = Effect.gen(function*() {
    const scope = yield* Scope.make()
    const result = yield* program.pipe(Scope.extend(scope))
    yield* Effect.forkDaemon(Scope.close(scope, Exit.void))
    return result
  })

  const seeded = scoped.pipe(
    Effect.withScheduler(makeSimulationScheduler()),
    Effect.withClock(clock),
    Effect.withRandom(Random.make(`engine:${seed}`)),
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map())),
    // Fiber-local, so the fibers that outlive the run (closing in the background) keep it too.
    Effect.locally(FiberRef.currentLoggers, HashSet.make(traceLogger(trace)))
  )
  return Effect.zipRight(yieldToEventLoop, seeded)
}

/** The lines a failing seed prints: the seed, the invariant, the last steps, the replay command. */
export const describeFailure = (result: SeedResult): ReadonlyArray<string> => [
  `SEED ${result.seed} FAILED: ${result.violation?.invariant ?? "?"}`,
  `  ${result.violation?.detail ?? ""}`,
  `  trace ${result.traceHash} (${result.traceLength} entries, ${result.steps} steps); the last ${result.lastEntries.length}:`,
  ...result.lastEntries.map((entry) => `    ${formatEntry(entry)}`),
  `  replay: npm run simulate -- --seed ${result.seed}`
]

export interface RunSummary {
  readonly seeds: number
  readonly failures: ReadonlyArray<SeedResult>
  readonly wallMs: number
}

/** Seeds `from` .. `from + count - 1`, one after another; stops at the first failure when asked. */
export const runSeeds = (
  from: number,
  count: number,
  options: {
    readonly overrides?: Partial<SimulationSettings>
    readonly stopAtFirstFailure?: boolean
    readonly onResult?: (result: SeedResult) => Effect.Effect<void>
  } = {}
) =>
  Effect.gen(function*() {
    const failures: Array<SeedResult> = []
    let seeds = 0
    const started = yield* Clock.currentTimeMillis
    for (let seed = from; seed < from + count; seed++) {
      const result = yield* runSeed(seed, options.overrides)
      seeds += 1
      if (options.onResult !== undefined) yield* options.onResult(result)
      if (!result.ok) {
        failures.push(result)
        if (options.stopAtFirstFailure === true) break
      }
    }
    const wallMs = (yield* Clock.currentTimeMillis) - started
    return { seeds, failures, wallMs } satisfies RunSummary
  })
