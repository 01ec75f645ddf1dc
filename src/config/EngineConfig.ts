import { Config, Context, Layer, Option, Redacted } from "effect"
import { isIP } from "node:net"
import { jwtSecretConfig } from "./AuthSettings.js"
import { positiveMillis } from "./configValues.js"

/**
 * The engine's configuration, read with Effect `Config` from the environment. Variable names
 * are a public contract (operators set them); a bad value fails at start naming the variable.
 */

const mysqlUrl = (name: string) =>
  Config.string(name).pipe(
    Config.validate({
      message: `${name} must look like mysql://user:password@host:port/database`,
      validation: (value) => {
        try {
          const url = new URL(value)
          return (url.protocol === "mysql:" || url.protocol === "mariadb:") && url.hostname !== "" &&
            url.pathname.length > 1
        } catch {
          return false
        }
      }
    }),
    Config.map(Redacted.make)
  )

const redisUrl = (name: string) =>
  Config.string(name).pipe(
    Config.validate({
      message: `${name} must look like redis://[user:password@]host:port[/db]`,
      validation: (value) => {
        try {
          const url = new URL(value)
          return (url.protocol === "redis:" || url.protocol === "rediss:") && url.hostname !== ""
        } catch {
          return false
        }
      }
    }),
    Config.map(Redacted.make)
  )

/** An RFC 1123 host name: dot-separated labels of letters, digits and inner hyphens. */
const hostName =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/

const base64Key32 = (name: string) =>
  Config.redacted(name).pipe(
    Config.validate({
      message: `${name} must be 32 bytes encoded in base64`,
      validation: (value) => Buffer.from(Redacted.value(value), "base64").length === 32
    })
  )

/** The Redis keys' prefix when `REDIS_KEY_PREFIX` is unset. */
export const defaultRedisPrefix = "aije"

/** Where the state lives. Both URLs unset means the embedded, in-memory engine. */
export class StorageConfig extends Context.Tag("ai-job-engine/StorageConfig")<
  StorageConfig,
  {
    readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
    readonly redisUrl: Option.Option<Redacted.Redacted<string>>
    /**
     * `DATABASE_POOL_SIZE` (default 10): MySQL connections per process in each of its two pools,
     * standalone statements and transactions (docs/architecture.md §5.6). Every job's statements
     * queue for these, so a worker holding hundreds of jobs needs more than ten (the goodput bench
     * at 500 in flight: 10 left 160 jobs waiting to be locked and an interactive one 10 s behind them).
     */
    readonly databasePoolSize: number
    /** `REDIS_KEY_PREFIX` (default `aije`): what every Redis key of this engine starts with. */
    readonly redisKeyPrefix: string
  }
>() {
  static readonly config = Config.all({
    databaseUrl: Config.option(mysqlUrl("DATABASE_URL")),
    redisUrl: Config.option(redisUrl("REDIS_URL")),
    databasePoolSize: Config.integer("DATABASE_POOL_SIZE").pipe(
      Config.withDefault(10),
      Config.validate({
        message: "DATABASE_POOL_SIZE must be a whole number from 1 to 1000",
        validation: (n) => n >= 1 && n <= 1_000
      })
    ),
    redisKeyPrefix: Config.string("REDIS_KEY_PREFIX").pipe(
      Config.withDefault(defaultRedisPrefix),
      Config.validate({
        message: "REDIS_KEY_PREFIX must be 1-64 letters, digits, '-', '_' or '.'",
        validation: (value) => /^[A-Za-z0-9._-]{1,64}$/.test(value)
      })
    )
  })
  static readonly layer = Layer.effect(StorageConfig, StorageConfig.config)
}

/**
 * Lease settings: a lock lasts `JOB_LOCK_TTL_MS`, the worker's lease keeper extends it every
 * `JOB_HEARTBEAT_MS`. A killed worker's job is taken over about TTL + grace + one reaper interval
 * later; the other recovery timers default to multiples of the lease, so one setting scales all.
 */
export const leaseDefaults = {
  jobLockTtlMs: 15_000,
  jobHeartbeatMs: 5_000,
  reaperGraceMs: 5_000,
  reaperIntervalMs: 5_000
} as const

/** A queued job untouched this long may have lost its delivery: twice the lease. */
export const queuedRedispatchFor = (jobLockTtlMs: number) => 2 * jobLockTtlMs
/** A dispatcher's claim on outbox events lasts as long as a job lease. */
export const outboxLockTtlFor = (jobLockTtlMs: number) => jobLockTtlMs

const optionalMillis = (name: string) =>
  Config.option(
    Config.integer(name).pipe(
      Config.validate({ message: `${name} must be a positive whole number of milliseconds`, validation: (n) => n > 0 })
    )
  )

/** The timing knobs of leases, heartbeats and the outbox. */
export class TimingConfig extends Context.Tag("ai-job-engine/TimingConfig")<
  TimingConfig,
  {
    readonly jobLockTtlMs: number
    readonly jobHeartbeatMs: number
    readonly reaperGraceMs: number
    readonly outboxLockTtlMs: number
    readonly outboxPollMs: number
    readonly snapshotRetentionMs: number
    readonly reaperIntervalMs: number
    readonly queuedRedispatchMs: number
  }
>() {
  static readonly config = Config.all({
    jobLockTtlMs: positiveMillis("JOB_LOCK_TTL_MS", leaseDefaults.jobLockTtlMs),
    jobHeartbeatMs: positiveMillis("JOB_HEARTBEAT_MS", leaseDefaults.jobHeartbeatMs),
    reaperGraceMs: positiveMillis("REAPER_GRACE_MS", leaseDefaults.reaperGraceMs),
    outboxLockTtlMs: optionalMillis("OUTBOX_LOCK_TTL_MS"),
    outboxPollMs: positiveMillis("OUTBOX_POLL_MS", 1_000),
    snapshotRetentionMs: positiveMillis("SNAPSHOT_RETENTION_MS", 7 * 24 * 60 * 60 * 1000),
    reaperIntervalMs: positiveMillis("REAPER_INTERVAL_MS", leaseDefaults.reaperIntervalMs),
    queuedRedispatchMs: optionalMillis("QUEUED_REDISPATCH_MS")
  }).pipe(
    Config.map((timing) => ({
      ...timing,
      outboxLockTtlMs: Option.getOrElse(timing.outboxLockTtlMs, () => outboxLockTtlFor(timing.jobLockTtlMs)),
      queuedRedispatchMs: Option.getOrElse(timing.queuedRedispatchMs, () => queuedRedispatchFor(timing.jobLockTtlMs))
    })),
    Config.validate({
      message: "JOB_HEARTBEAT_MS must be shorter than JOB_LOCK_TTL_MS, or the lock lapses between heartbeats",
      validation: (timing) => timing.jobHeartbeatMs < timing.jobLockTtlMs
    })
  )
  static readonly layer = Layer.effect(TimingConfig, TimingConfig.config)
  /** The defaults, for tests and simulations that set timing in code. */
  static readonly make = (overrides: Partial<TimingConfig["Type"]> = {}) => {
    const jobLockTtlMs = overrides.jobLockTtlMs ?? leaseDefaults.jobLockTtlMs
    return Layer.succeed(TimingConfig, {
      ...leaseDefaults,
      jobLockTtlMs,
      outboxLockTtlMs: outboxLockTtlFor(jobLockTtlMs),
      outboxPollMs: 1_000,
      snapshotRetentionMs: 7 * 24 * 60 * 60 * 1000,
      queuedRedispatchMs: queuedRedispatchFor(jobLockTtlMs),
      ...overrides
    })
  }
}

/** The AI provider and the keys the engine holds. */
export class ProviderConfig extends Context.Tag("ai-job-engine/ProviderConfig")<
  ProviderConfig,
  {
    readonly baseUrl: string
    readonly apiKey: Option.Option<Redacted.Redacted<string>>
    readonly model: string
    readonly credentialEncryptionKey: Option.Option<Redacted.Redacted<string>>
  }
>() {
  static readonly config = Config.all({
    baseUrl: Config.string("AI_BASE_URL").pipe(
      Config.withDefault("https://api.deepseek.com"),
      Config.validate({
        message: "AI_BASE_URL must be an http(s) URL",
        validation: (value) => /^https?:\/\/[^\s]+$/.test(value)
      })
    ),
    apiKey: Config.option(Config.redacted("AI_API_KEY")),
    model: Config.string("AI_MODEL").pipe(Config.withDefault("deepseek-chat")),
    credentialEncryptionKey: Config.option(base64Key32("CREDENTIAL_ENCRYPTION_KEY"))
  })
  static readonly layer = Layer.effect(ProviderConfig, ProviderConfig.config)
}

/** The HTTP server and its authentication. */
export class HttpConfig extends Context.Tag("ai-job-engine/HttpConfig")<
  HttpConfig,
  {
    readonly port: number
    /** `HOST`: the address to listen on; unset, every interface (Node's default: `::`, or `0.0.0.0` without IPv6). */
    readonly host: Option.Option<string>
    readonly authJwtSecret: Option.Option<Redacted.Redacted<string>>
  }
>() {
  static readonly config = Config.all({
    port: Config.port("PORT").pipe(Config.withDefault(3000)),
    host: Config.option(
      Config.string("HOST").pipe(
        Config.validate({
          message: "HOST must be an IP address or a host name (0.0.0.0, 127.0.0.1, ::1, api.internal)",
          validation: (value) => isIP(value) !== 0 || hostName.test(value)
        })
      )
    ),
    authJwtSecret: Config.option(jwtSecretConfig)
  })
  static readonly layer = Layer.effect(HttpConfig, HttpConfig.config)
}

const positiveSeconds = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.withDefault(fallback),
    Config.validate({ message: `${name} must be a positive whole number of seconds`, validation: (n) => n > 0 })
  )

/**
 * Bounds on the engine's MySQL transactions, set on their sessions. `lockWaitTimeoutS`: how
 * long a statement waits for a row lock (`innodb_lock_wait_timeout`). `idleTransactionTimeoutS`:
 * how long a write transaction may sit idle before the server kills its connection and rolls it
 * back (MariaDB's `idle_write_transaction_timeout`; MySQL has no such bound), so a frozen
 * worker's transaction cannot hold a job's rows from the worker that took it over.
 */
export class DatabaseSessionConfig extends Context.Tag("ai-job-engine/DatabaseSessionConfig")<
  DatabaseSessionConfig,
  { readonly lockWaitTimeoutS: number; readonly idleTransactionTimeoutS: number }
>() {
  static readonly config = Config.all({
    lockWaitTimeoutS: positiveSeconds("DB_LOCK_WAIT_TIMEOUT_S", 5),
    idleTransactionTimeoutS: positiveSeconds("DB_IDLE_TRANSACTION_TIMEOUT_S", 10)
  })
  static readonly layer = Layer.effect(DatabaseSessionConfig, DatabaseSessionConfig.config)
}
