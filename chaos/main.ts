/**
 * `npm run chaos -- [--profile ci|long] [--seed N] [--duration SECONDS] [--keep-logs]`: the
 * engine as operators run it (2 APIs, 2 dispatchers, 3 workers as real processes, on a scratch
 * MariaDB database and a private Redis), a fake provider that flaps, clients creating and
 * cancelling jobs over HTTP, and a seeded schedule of faults: kill -9, SIGTERM and SIGSTOP of
 * every process type, a rolling restart of the workers, KILL CONNECTION of the engine's MySQL
 * sessions, a Redis restart (empty) and CLIENT PAUSE, provider 500 / 429 / slow / malformed.
 * When the load stops and the fleet has drained, a checker reads MySQL (and the creates' answer
 * times during Redis pauses, and the workers' logs for hand-offs that failed their delivery);
 * the run prints a table and exits 1 on any violation.
 * Everything it started (processes, Redis, database) is removed at the end, also on Ctrl-C.
 */
import { Command, Options } from "@effect/cli"
import { FileSystem } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { MysqlClient } from "@effect/sql-mysql2"
import { Clock, Console, Data, Duration, Effect, Layer, Option, Random, Redacted, Schema } from "effect"
import { randomBytes } from "node:crypto"
import { join } from "node:path"
import { runMigrations } from "../src/layers/mysql/migrate.js"
import { mysqlClientLayer } from "../src/layers/mysql/MysqlDatabase.js"
import { checkDatabase, type Violation } from "./checker.js"
import { faultKinds, type FaultTiming, injectFaults, planFaults } from "./faults.js"
import { startFleet } from "./fleet.js"
import { runLoad, sentWhileRedisPaused } from "./load.js"
import { ChaosError } from "./process.js"
import { startChaosProvider } from "./provider.js"
import { startChaosRedis } from "./redis.js"
import { formatSummary } from "./report.js"

interface Profile {
  readonly loadSeconds: number
  readonly ratePerSecond: number
  /** At least this many jobs acknowledged, or the run did not test what it claims. */
  readonly minJobs: number
  readonly drainSeconds: number
  /** Every fault kind must have been injected. */
  readonly requireEveryKind: boolean
}

const profiles: Record<"ci" | "long", Profile> = {
  // About three and a half minutes on a loaded 2-core machine, start and drain included.
  ci: { loadSeconds: 75, ratePerSecond: 2.4, minJobs: 150, drainSeconds: 75, requireEveryKind: true },
  long: { loadSeconds: 600, ratePerSecond: 3, minJobs: 0, drainSeconds: 180, requireEveryKind: true }
}

/** Leases short enough that every recovery path runs within seconds. */
const engineTiming = {
  JOB_LOCK_TTL_MS: "3000",
  JOB_HEARTBEAT_MS: "1000",
  REAPER_GRACE_MS: "1000",
  REAPER_INTERVAL_MS: "1000",
  QUEUED_REDISPATCH_MS: "10000",
  OUTBOX_POLL_MS: "500",
  OUTBOX_LOCK_TTL_MS: "5000",
  WORKER_SHUTDOWN_GRACE_MS: "3000"
}

const faultTiming: FaultTiming = {
  stopMs: { api: 4_000, dispatcher: 7_000, worker: 6_000 },
  providerWindowMs: 5_000,
  redisPauseMs: 5_000,
  rollingStepMs: 1_300
}

/**
 * A create sent while Redis is paused is answered within this (503, or 202 when it committed):
 * the gate's Redis check and the creator's own add wait about a second each.
 */
const createDeadlineMs = 2_500

const fleetSize = { api: 2, dispatcher: 2, worker: 3 } as const

class ChaosFailed extends Data.TaggedError("ChaosFailed")<{ readonly message: string }> {}

const serverUrl = process.env["CHAOS_DATABASE_URL"] ?? process.env["TEST_DATABASE_URL"] ??
  "mysql://root@127.0.0.1:3306/test"

const databaseUrlFor = (database: string) => {
  const url = new URL(serverUrl)
  url.pathname = `/${database}`
  return url.toString()
}

/** `chaos_<seed>_<random>`, migrated with the engine's own migrator, dropped with the scope. */
const scratchDatabase = (seed: number) =>
  Effect.gen(function*() {
    const name = `chaos_${seed}_${randomBytes(4).toString("hex")}`
    const admin = yield* MysqlClient.MysqlClient
    yield* Effect.acquireRelease(
      admin.unsafe(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`),
      () => admin.unsafe(`DROP DATABASE IF EXISTS \`${name}\``).pipe(Effect.ignore)
    )
    yield* runMigrations.pipe(
      Effect.provide(
        Layer.merge(mysqlClientLayer(Redacted.make(databaseUrlFor(name)), { maxConnections: 1 }), NodeContext.layer)
      )
    )
    return name
  })

/**
 * The workers' log lines of deliveries handed back by a stopping worker that failed instead of
 * going straight back to the queue (a give-back for want of a database is a failure, rightly).
 */
const failedHandBacks = (logDir: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const files = (yield* fs.readDirectory(logDir)).filter((file) =>
      file.startsWith("worker-") && file.endsWith(".log")
    )
    const lines = yield* Effect.forEach(
      files,
      (file) =>
        Effect.map(fs.readFileString(join(logDir, file)), (text) => text.split("\n").map((line) => `${file}: ${line}`))
    )
    return lines.flat().filter((line) =>
      line.includes("Queue delivery failed") && line.includes("JobHandedOff") && !line.includes("storage unavailable")
    ).map((line) => line.slice(0, 300))
  })

const OpenWork = Schema.Struct({ openJobs: Schema.Number, openEvents: Schema.Number })

/** Waits until every job is terminal and no outbox event waits, or `bound` passes. */
const drain = (database: string, bound: Duration.Duration) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const until = (yield* Clock.currentTimeMillis) + Duration.toMillis(bound)
    while (true) {
      const [open] = yield* sql.unsafe(
        `SELECT (SELECT COUNT(*) FROM \`${database}\`.ai_job WHERE lifecycle_status NOT IN ('succeeded', 'failed', 'cancelled')) AS open_jobs,
                (SELECT COUNT(*) FROM \`${database}\`.outbox_event WHERE status IN ('pending', 'processing', 'failed')) AS open_events`
      ).pipe(Effect.flatMap(Schema.decodeUnknown(Schema.Array(OpenWork))))
      if (open === undefined || (open.openJobs === 0 && open.openEvents === 0)) return true
      if ((yield* Clock.currentTimeMillis) > until) return false
      yield* Effect.sleep(Duration.seconds(1))
    }
  })

const run = (
  options: {
    readonly profile: "ci" | "long"
    readonly seed: number
    readonly loadSeconds: number
    readonly keepLogs: boolean
  }
) =>
  Effect.gen(function*() {
    const profile = profiles[options.profile]
    const fs = yield* FileSystem.FileSystem
    const began = yield* Clock.currentTimeMillis
    const phases: Array<readonly [string, number]> = []
    let mark = began
    const phase = (name: string) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        phases.push([name, now - mark])
        mark = now
      })

    const logDir = yield* fs.makeTempDirectory({ prefix: `chaos-${options.seed}-` })
    yield* Console.log(
      `chaos: seed ${options.seed}, profile ${options.profile}, ${options.loadSeconds} s of load; logs in ${logDir}`
    )
    const database = yield* scratchDatabase(options.seed)
    const redis = yield* startChaosRedis(logDir)
    const provider = yield* startChaosProvider({ latencyMs: [200, 1_200], slowMs: 4_500 })
    const jwtSecret = randomBytes(32).toString("base64url")
    const fleet = yield* startFleet({
      counts: fleetSize,
      logDir,
      readyTimeout: Duration.seconds(120),
      env: {
        DATABASE_URL: databaseUrlFor(database),
        REDIS_URL: redis.url,
        REDIS_KEY_PREFIX: "chaos",
        AUTH_JWT_SECRET: jwtSecret,
        AI_GATEWAY: "openai",
        AI_BASE_URL: provider.baseUrl,
        AI_API_KEY: provider.apiKey,
        AI_PROVIDER: "chaos-fake",
        AI_REQUEST_TIMEOUT_MS: "10000",
        MIGRATE_ON_START: "false",
        MAX_ACTIVE_JOBS_PER_USER: "1000",
        DAILY_JOB_QUOTA: "100000",
        WORKER_CONCURRENCY_INTERACTIVE: "3",
        WORKER_CONCURRENCY_BACKGROUND: "3",
        LOG_FORMAT: "json",
        LOG_LEVEL: "Info",
        ...engineTiming
      }
    })
    yield* phase("start")

    const loadMs = options.loadSeconds * 1000
    const plan = yield* planFaults(options.seed, {
      startMs: 5_000,
      endMs: Math.max(10_000, loadMs - 12_000),
      extra: Math.max(0, Math.round(options.loadSeconds / 4.5) - faultKinds.length)
    })
    const startedAtMs = yield* Clock.currentTimeMillis
    const [load, injection] = yield* Effect.all(
      [
        runLoad({
          apiUrls: fleet.apiUrls,
          jwtSecret,
          seed: options.seed,
          ratePerSecond: profile.ratePerSecond,
          duration: Duration.seconds(options.loadSeconds),
          users: 20,
          cancelShare: 0.1,
          patience: Duration.seconds(60)
        }),
        injectFaults({
          plan,
          fleet,
          redis,
          provider,
          database,
          timing: faultTiming,
          startedAtMs,
          eligibleWithin: Duration.seconds(40),
          lastStartMs: loadMs + 20_000
        })
      ],
      { concurrency: "unbounded" }
    )
    yield* phase("load")

    const drained = yield* drain(database, Duration.seconds(profile.drainSeconds))
    yield* injection.monitorsDone.pipe(Effect.timeout(Duration.seconds(10)), Effect.ignore)
    yield* phase("drain")

    const createsHeldByRedis = sentWhileRedisPaused(
      load.createRequests,
      injection.report.redisPauses,
      injection.report.apiOutages
    )
      .filter((request) => request.ms > createDeadlineMs)
      .map((request) => `answered ${request.answer} after ${request.ms} ms (deadline ${createDeadlineMs} ms)`)
    const handBacksFailed = yield* failedHandBacks(logDir)
    const check = yield* checkDatabase({
      createsHeldByRedis,
      handBacksFailed,
      acknowledged: load.acknowledged,
      cancelRefused: load.cancelRefused,
      crashedJobs: injection.report.crashedJobs,
      frozenJobs: injection.report.frozenJobs,
      handedOffJobs: injection.report.handedOffJobs,
      serverErrorAnswers: load.serverErrors,
      unexpectedAnswers: load.unexpected,
      exactFlashcardCount: true
    }).pipe(Effect.provide(mysqlClientLayer(Redacted.make(databaseUrlFor(database)), { maxConnections: 2 })))
    yield* phase("check")

    const exitedAlone = yield* fleet.unexpectedExits
    const injectedKinds = new Set(injection.report.injected.map((f) => f.kind))
    const missingKinds = faultKinds.filter((kind) => !injectedKinds.has(kind))
    const runProblems = [
      ...(drained ? [] : [`the fleet did not drain within ${profile.drainSeconds} s`]),
      ...exitedAlone.map((name) => `${name} exited although nobody stopped it`),
      ...(profile.requireEveryKind && missingKinds.length > 0
        ? [`fault kinds never injected: ${missingKinds.join(", ")}`]
        : []),
      ...(load.acknowledged.length < profile.minJobs
        ? [`only ${load.acknowledged.length} jobs created; the profile needs ${profile.minJobs}`]
        : []),
      ...injection.report.problems.map((p) => `injector: ${p}`)
    ]
    const violations: ReadonlyArray<Violation> = check.violations
    const total = (yield* Clock.currentTimeMillis) - began
    yield* Console.log(formatSummary({
      header:
        `chaos run: seed ${options.seed}, profile ${options.profile}, ${options.loadSeconds} s of load at ${profile.ratePerSecond} jobs/s, ` +
        `fleet ${fleetSize.api} api + ${fleetSize.dispatcher} dispatchers + ${fleetSize.worker} workers, lease ${engineTiming.JOB_LOCK_TTL_MS} ms; ` +
        `total ${(total / 1000).toFixed(1)} s`,
      phases,
      injection: injection.report,
      load,
      provider: yield* provider.stats,
      check,
      violations,
      runProblems
    }))
    // Hard failures only: a fault the injector could not apply in time is reported, not fatal.
    const fatal = violations.length > 0 || !drained || runProblems.some((p) => !p.startsWith("injector:"))
    if (fatal) {
      yield* Console.error(
        `chaos run FAILED; logs kept in ${logDir}; replay with: npm run chaos -- --profile ${options.profile} --seed ${options.seed} --duration ${options.loadSeconds}`
      )
      return yield* new ChaosFailed({ message: "chaos run failed" })
    }
    if (!options.keepLogs) yield* fs.remove(logDir, { recursive: true }).pipe(Effect.ignore)
    yield* Console.log("chaos run passed")
  }).pipe(Effect.scoped, Effect.provide(mysqlClientLayer(Redacted.make(serverUrl), { maxConnections: 4 })))

const chaos = Command.make(
  "chaos",
  {
    profile: Options.choice("profile", ["ci", "long"]).pipe(
      Options.withDefault("ci" as const),
      Options.withDescription("ci: ~3.5 minutes, every fault kind; long: 10 minutes of load.")
    ),
    seed: Options.integer("seed").pipe(
      Options.optional,
      Options.withDescription("Repeat a run: the same workload and fault schedule.")
    ),
    duration: Options.integer("duration").pipe(
      Options.optional,
      Options.withDescription("Seconds of load (faults are spread over it).")
    ),
    keepLogs: Options.boolean("keep-logs").pipe(
      Options.withDescription("Keep the processes' logs even when the run passes.")
    )
  },
  ({ duration, keepLogs, profile, seed }) =>
    Effect.gen(function*() {
      const chosenSeed = Option.isSome(seed) ? seed.value : yield* Random.nextIntBetween(1, 1_000_000)
      const loadSeconds = Option.getOrElse(duration, () => profiles[profile].loadSeconds)
      return yield* run({ profile, seed: chosenSeed, loadSeconds, keepLogs })
    })
)

Command.run(chaos, { name: "chaos", version: "0.1.0" })(process.argv).pipe(
  Effect.catchTag(
    "ChaosError",
    (error: ChaosError) => Console.error(`chaos: ${error.message}`).pipe(Effect.zipRight(Effect.fail(error)))
  ),
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain({ disableErrorReporting: true })
)
