import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Either, Option, Redacted } from "effect"
import { HttpConfig, ProviderConfig, StorageConfig, TimingConfig } from "../../src/config/EngineConfig.js"
import { httpTransportConfig } from "../../src/config/HttpTransportSettings.js"
import { logLevelConfig } from "../../src/config/LoggingSettings.js"
import { heapGrowthPercentConfig } from "../../src/config/WorkerSettings.js"

const withEnv = (env: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

describe("configuration", () => {
  it.effect("reads the defaults with nothing set (the embedded engine)", () =>
    Effect.gen(function*() {
      const timing = yield* TimingConfig.config
      // Leases that recover in seconds (issue 18); the spec's 60 s / 30 s remain a setting.
      expect(timing).toMatchObject({
        jobLockTtl: Duration.millis(15_000),
        jobHeartbeatInterval: Duration.millis(5_000),
        reaperGrace: Duration.millis(5_000),
        reaperInterval: Duration.millis(5_000),
        outboxLockTtl: Duration.millis(15_000),
        queuedRedispatchAfter: Duration.millis(30_000),
        outboxPollInterval: Duration.millis(1_000)
      })
      const storage = yield* StorageConfig.config
      expect(Option.isNone(storage.databaseUrl)).toBe(true)
      expect(Option.isNone(storage.redisUrl)).toBe(true)
      expect((yield* HttpConfig.config).port).toBe(3000)
      const provider = yield* ProviderConfig.config
      expect(provider.model).toBe("deepseek-chat")
    }).pipe(withEnv({})))

  it.effect("recovery timers follow the lease unless set: the spec's lease is one setting away", () =>
    Effect.gen(function*() {
      const spec = yield* TimingConfig.config.pipe(withEnv({ JOB_LOCK_TTL_MS: "60000", JOB_HEARTBEAT_MS: "30000" }))
      expect(spec).toMatchObject({
        jobLockTtl: Duration.millis(60_000),
        jobHeartbeatInterval: Duration.millis(30_000),
        outboxLockTtl: Duration.millis(60_000),
        queuedRedispatchAfter: Duration.millis(120_000)
      })
      const explicit = yield* TimingConfig.config.pipe(
        withEnv({ OUTBOX_LOCK_TTL_MS: "7000", QUEUED_REDISPATCH_MS: "300000" })
      )
      expect(explicit).toMatchObject({
        jobLockTtl: Duration.millis(15_000),
        outboxLockTtl: Duration.millis(7_000),
        queuedRedispatchAfter: Duration.millis(300_000)
      })
      const bad = yield* Effect.either(TimingConfig.config.pipe(withEnv({ QUEUED_REDISPATCH_MS: "0" })))
      expect(Either.isLeft(bad) && String(bad.left)).toContain("QUEUED_REDISPATCH_MS")
    }))

  it.effect("keeps secrets redacted", () =>
    Effect.gen(function*() {
      const provider = yield* ProviderConfig.config
      const key = Option.getOrThrow(provider.apiKey)
      expect(String(key)).not.toContain("sk-canary")
      expect(Redacted.value(key)).toBe("sk-canary-123")
      const storage = yield* StorageConfig.config
      expect(String(Option.getOrThrow(storage.databaseUrl))).not.toContain("hunter2")
    }).pipe(withEnv({ AI_API_KEY: "sk-canary-123", DATABASE_URL: "mysql://root:hunter2@127.0.0.1:3306/app" })))

  const bad: ReadonlyArray<readonly [string, string, Effect.Effect<unknown, unknown>]> = [
    ["JOB_LOCK_TTL_MS", "soon", TimingConfig.config],
    ["JOB_HEARTBEAT_MS", "-5", TimingConfig.config],
    ["OUTBOX_POLL_MS", "0", TimingConfig.config],
    ["PORT", "70000", HttpConfig.config],
    ["DATABASE_URL", "postgres://localhost/db", StorageConfig.config],
    ["REDIS_URL", "localhost:6379", StorageConfig.config],
    ["CREDENTIAL_ENCRYPTION_KEY", "c2hvcnQ=", ProviderConfig.config],
    ["AUTH_JWT_SECRET", "short", HttpConfig.config],
    ["HTTP_MAX_BODY_BYTES", "0", httpTransportConfig],
    ["HTTP_REQUEST_TIMEOUT_MS", "later", httpTransportConfig],
    ["CORS_ALLOWED_ORIGINS", "*", httpTransportConfig],
    ["CORS_ALLOWED_ORIGINS", "https://app.example.com/path", httpTransportConfig]
  ]
  for (const [name, value, read] of bad) {
    it.effect(`a bad ${name} fails with a message naming it`, () =>
      Effect.gen(function*() {
        const result = yield* Effect.either(read.pipe(withEnv({ [name]: value })))
        expect(Either.isLeft(result)).toBe(true)
        if (Either.isLeft(result)) expect(String(result.left)).toContain(name)
      }))
  }

  it.effect("a heartbeat as long as the lock TTL is refused", () =>
    Effect.gen(function*() {
      const result = yield* Effect.either(
        TimingConfig.config.pipe(withEnv({ JOB_LOCK_TTL_MS: "1000", JOB_HEARTBEAT_MS: "1000" }))
      )
      expect(Either.isLeft(result) && String(result.left)).toContain("JOB_HEARTBEAT_MS")
    }))

  it.effect("HTTP transport: 1 MiB bodies, 30 s / 10 s timeouts and no CORS by default; origins are a comma-separated list", () =>
    Effect.gen(function*() {
      expect(yield* httpTransportConfig.pipe(withEnv({}))).toEqual({
        maxBodyBytes: 1_048_576,
        requestTimeout: Duration.seconds(30),
        headersTimeout: Duration.seconds(10),
        corsAllowedOrigins: []
      })
      const listed = yield* httpTransportConfig.pipe(
        withEnv({ CORS_ALLOWED_ORIGINS: "https://a.example, http://localhost:5173" })
      )
      expect(listed.corsAllowedOrigins).toEqual(["https://a.example", "http://localhost:5173"])
      const longerHeaders = yield* Effect.either(
        httpTransportConfig.pipe(withEnv({ HTTP_REQUEST_TIMEOUT_MS: "1000", HTTP_HEADERS_TIMEOUT_MS: "2000" }))
      )
      expect(Either.isLeft(longerHeaders) && String(longerHeaders.left)).toContain("HTTP_HEADERS_TIMEOUT_MS")
    }))

  it.effect("a worker's heap growth: 50 % by default, 0 for V8's own policy, nothing in between or past 300", () =>
    Effect.gen(function*() {
      expect(yield* heapGrowthPercentConfig.pipe(withEnv({}))).toBe(50)
      expect(yield* heapGrowthPercentConfig.pipe(withEnv({ WORKER_HEAP_GROWTH_PERCENT: "0" }))).toBe(0)
      expect(yield* heapGrowthPercentConfig.pipe(withEnv({ WORKER_HEAP_GROWTH_PERCENT: "120" }))).toBe(120)
      for (const bad of ["5", "301", "-1", "fifty"]) {
        const refused = yield* Effect.either(heapGrowthPercentConfig.pipe(withEnv({ WORKER_HEAP_GROWTH_PERCENT: bad })))
        expect(Either.isLeft(refused) && String(refused.left), bad).toContain("WORKER_HEAP_GROWTH_PERCENT")
      }
    }))

  it.effect("LOG_LEVEL takes the level names the README lists", () =>
    Effect.gen(function*() {
      for (const name of ["Debug", "Info", "Warn", "Error", "Off"]) {
        expect(Either.isRight(yield* Effect.either(logLevelConfig.pipe(withEnv({ LOG_LEVEL: name })))), name).toBe(true)
      }
    }))
})
