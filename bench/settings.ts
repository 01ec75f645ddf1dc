import { Config, Effect } from "effect"

/**
 * The benchmark's knobs. Every one has a default sized for a 2-core machine and the 5-minute
 * budget; `BENCH_*` environment variables override them (e.g. `BENCH_JOBS=500 npm run bench`
 * for a quick look).
 */
export interface BenchSettings {
  /** The MariaDB/MySQL server; the bench makes its own scratch database on it. */
  readonly serverUrl: string
  readonly redisUrl: string
  /** N: jobs of the raw BullMQ baseline, transactions of the raw MySQL baseline, jobs of the engine's full-load run. */
  readonly jobs: number
  /** Producers in flight, worker concurrency, and connections of the HTTP load generator. */
  readonly concurrency: number
  /** Length of the paced (half-load) runs. */
  readonly halfLoadSeconds: number
  /** Length of each HTTP measurement (after a short warm-up). */
  readonly httpSeconds: number
  /** The two points at which worker memory is read. */
  readonly memoryJobsFirst: number
  readonly memoryJobsSecond: number
  /** The whole run's budget; the memory part shrinks its job counts to fit what is left. */
  readonly budgetSeconds: number
}

const positiveInt = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.withDefault(fallback),
    Config.validate({ message: `${name} must be a positive whole number`, validation: (n) => n > 0 })
  )

export const loadBenchSettings: Effect.Effect<BenchSettings, import("effect/ConfigError").ConfigError> = Config.all({
  serverUrl: Config.string("BENCH_DATABASE_URL").pipe(Config.withDefault("mysql://root@127.0.0.1:3306/test")),
  redisUrl: Config.string("BENCH_REDIS_URL").pipe(Config.withDefault("redis://127.0.0.1:6379")),
  jobs: positiveInt("BENCH_JOBS", 2_000),
  concurrency: positiveInt("BENCH_CONCURRENCY", 16),
  halfLoadSeconds: positiveInt("BENCH_HALF_LOAD_SECONDS", 8),
  httpSeconds: positiveInt("BENCH_HTTP_SECONDS", 10),
  memoryJobsFirst: positiveInt("BENCH_MEMORY_JOBS_FIRST", 10_000),
  memoryJobsSecond: positiveInt("BENCH_MEMORY_JOBS_SECOND", 50_000),
  budgetSeconds: positiveInt("BENCH_BUDGET_SECONDS", 285)
})
