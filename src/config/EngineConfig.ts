import { Config, Context, Duration, Layer, Option, Redacted } from "effect"
import { isIP } from "node:net"
import { jwtSecretConfig } from "./AuthSettings.js"
import { optionalMillisDuration, positiveMillisDuration, positiveSecondsDuration } from "./configValues.js"

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

export const defaultRedisPrefix = "aije"

/** Where the state lives. Both URLs unset means the embedded, in-memory engine. */
export class StorageConfig extends Context.Tag("ai-job-engine/StorageConfig")<
  StorageConfig,
  {
    readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
    readonly redisUrl: Option.Option<Redacted.Redacted<string>>
    /**
     * `DATABASE_POOL_SIZE` (default 10): connections in each of the two pools (statements,
     * transactions). A worker holding hundreds of jobs needs more: at 500 in flight, 10 left 160
     * jobs waiting to be locked and an interactive one 10 s behind them.
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
  jobLockTtl: Duration.seconds(15),
  jobHeartbeatInterval: Duration.seconds(5),
  reaperGrace: Duration.seconds(5),
  reaperInterval: Duration.seconds(5)
} as const

/** A queued job untouched this long may have lost its delivery: twice the lease. */
export const queuedRedispatchFor = (jobLockTtl: Duration.Duration) => Duration.times(jobLockTtl, 2)
export const outboxLockTtlFor = (jobLockTtl: Duration.Duration) => jobLockTtl

const defaultOutboxPollInterval = Duration.seconds(1)
const defaultSnapshotRetention = Duration.days(7)

/** The timing knobs of leases, heartbeats and the outbox; each variable takes milliseconds. */
export class TimingConfig extends Context.Tag("ai-job-engine/TimingConfig")<
  TimingConfig,
  {
    /** `JOB_LOCK_TTL_MS`: how long a worker's lock on a job lasts unless extended. */
    readonly jobLockTtl: Duration.Duration
    /** `JOB_HEARTBEAT_MS`: how often the lease keeper extends the locks it holds. */
    readonly jobHeartbeatInterval: Duration.Duration
    /** `REAPER_GRACE_MS`: how long past its expiry a lock is left before the reaper takes the job back. */
    readonly reaperGrace: Duration.Duration
    /** `OUTBOX_LOCK_TTL_MS`: how long a dispatcher's claim on outbox events lasts (default: the job lock TTL). */
    readonly outboxLockTtl: Duration.Duration
    /** `OUTBOX_POLL_MS`: how often an idle dispatcher looks for events without a signal. */
    readonly outboxPollInterval: Duration.Duration
    /** `SNAPSHOT_RETENTION_MS`: how long a job's input snapshot is kept. */
    readonly snapshotRetention: Duration.Duration
    /** `REAPER_INTERVAL_MS`: the time between two reaper passes. */
    readonly reaperInterval: Duration.Duration
    /** `QUEUED_REDISPATCH_MS`: a queued job untouched this long is queued again (default: twice the lock TTL). */
    readonly queuedRedispatchAfter: Duration.Duration
  }
>() {
  static readonly config = Config.all({
    jobLockTtl: positiveMillisDuration("JOB_LOCK_TTL_MS", leaseDefaults.jobLockTtl),
    jobHeartbeatInterval: positiveMillisDuration("JOB_HEARTBEAT_MS", leaseDefaults.jobHeartbeatInterval),
    reaperGrace: positiveMillisDuration("REAPER_GRACE_MS", leaseDefaults.reaperGrace),
    outboxLockTtl: optionalMillisDuration("OUTBOX_LOCK_TTL_MS"),
    outboxPollInterval: positiveMillisDuration("OUTBOX_POLL_MS", defaultOutboxPollInterval),
    snapshotRetention: positiveMillisDuration("SNAPSHOT_RETENTION_MS", defaultSnapshotRetention),
    reaperInterval: positiveMillisDuration("REAPER_INTERVAL_MS", leaseDefaults.reaperInterval),
    queuedRedispatchAfter: optionalMillisDuration("QUEUED_REDISPATCH_MS")
  }).pipe(
    Config.map((timing) => ({
      ...timing,
      outboxLockTtl: Option.getOrElse(timing.outboxLockTtl, () => outboxLockTtlFor(timing.jobLockTtl)),
      queuedRedispatchAfter: Option.getOrElse(
        timing.queuedRedispatchAfter,
        () => queuedRedispatchFor(timing.jobLockTtl)
      )
    })),
    Config.validate({
      message: "JOB_HEARTBEAT_MS must be shorter than JOB_LOCK_TTL_MS, or the lock lapses between heartbeats",
      validation: (timing) => Duration.lessThan(timing.jobHeartbeatInterval, timing.jobLockTtl)
    })
  )
  static readonly layer = Layer.effect(TimingConfig, TimingConfig.config)
  /** The defaults, for tests and simulations that set timing in code. */
  static readonly make = (overrides: Partial<TimingConfig["Type"]> = {}) => {
    const jobLockTtl = overrides.jobLockTtl ?? leaseDefaults.jobLockTtl
    return Layer.succeed(TimingConfig, {
      ...leaseDefaults,
      jobLockTtl,
      outboxLockTtl: outboxLockTtlFor(jobLockTtl),
      outboxPollInterval: defaultOutboxPollInterval,
      snapshotRetention: defaultSnapshotRetention,
      queuedRedispatchAfter: queuedRedispatchFor(jobLockTtl),
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

/**
 * Session bounds in whole seconds: `innodb_lock_wait_timeout`, and MariaDB's
 * `idle_write_transaction_timeout` (MySQL has none), so a frozen worker's transaction cannot hold
 * a job's rows from the worker that took it over.
 */
export class DatabaseSessionConfig extends Context.Tag("ai-job-engine/DatabaseSessionConfig")<
  DatabaseSessionConfig,
  { readonly lockWaitTimeout: Duration.Duration; readonly idleTransactionTimeout: Duration.Duration }
>() {
  static readonly config = Config.all({
    lockWaitTimeout: positiveSecondsDuration("DB_LOCK_WAIT_TIMEOUT_S", Duration.seconds(5)),
    idleTransactionTimeout: positiveSecondsDuration("DB_IDLE_TRANSACTION_TIMEOUT_S", Duration.seconds(10))
  })
  static readonly layer = Layer.effect(DatabaseSessionConfig, DatabaseSessionConfig.config)
}
