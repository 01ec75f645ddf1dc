import { NodeContext } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer, Redacted, Schema, type Scope } from "effect"
import { randomBytes } from "node:crypto"
import type { LifecycleStatus } from "../../../src/domain/LifecycleStatus.js"
import { JobArtifactsResponse, JobStatusResponse } from "../../../src/http/ApiSchemas.js"
import { type Role, signToken } from "../../../src/http/AuthTokens.js"
import { runMigrations } from "../../../src/layers/mysql/migrate.js"
import { mysqlClientLayer } from "../../../src/layers/mysql/MysqlDatabase.js"
import { deleteRedisKeys, testRedisUrl, uniqueRedisPrefix } from "../../support/redis.js"
import { acquireScratchDatabase } from "../../support/scratchDatabase.js"
import { childEnv, type ChildProgram, freePort, nodeProgram, ProcessTestError, spawnProgram } from "./childProcess.js"

/**
 * What a process test gives its children: a scratch database (dropped at the end), a Redis key
 * prefix on the shared test Redis (its keys deleted at the end), a JWT secret, and timing knobs
 * short enough that leases, heartbeats and the reaper act within seconds.
 */
export interface EngineStorage {
  readonly databaseUrl: string
  readonly redisUrl: string
  readonly redisPrefix: string
  readonly jwtSecret: string
}

/** Short leases: a lock lapses 3 s after its last heartbeat, the reaper looks every 0.5 s. */
export const fastTiming: Readonly<Record<string, string>> = {
  JOB_LOCK_TTL_MS: "3000",
  JOB_HEARTBEAT_MS: "1000",
  REAPER_GRACE_MS: "1000",
  REAPER_INTERVAL_MS: "500",
  OUTBOX_POLL_MS: "200",
  OUTBOX_LOCK_TTL_MS: "5000",
  WORKER_SHUTDOWN_GRACE_MS: "5000"
}

/**
 * A scratch database (migrated unless `migrate: false`) and a Redis prefix, both removed when
 * the scope closes, even when the test failed. `redisUrl` defaults to the shared test Redis.
 */
export const engineStorage = (
  name: string,
  options: { readonly migrate?: boolean; readonly redisUrl?: string } = {}
): Effect.Effect<EngineStorage, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { url } = yield* acquireScratchDatabase(`proc_${name}`)
    if (options.migrate ?? true) {
      yield* runMigrations.pipe(
        Effect.provide(Layer.merge(mysqlClientLayer(Redacted.make(url), { maxConnections: 1 }), NodeContext.layer)),
        Effect.orDie
      )
    }
    const redisPrefix = uniqueRedisPrefix(`proc-${name}`)
    // Keys on a private redis-server die with it; on the shared one they are deleted here.
    if (options.redisUrl === undefined) yield* Effect.addFinalizer(() => deleteRedisKeys(redisPrefix))
    return {
      databaseUrl: url,
      redisUrl: options.redisUrl ?? testRedisUrl,
      redisPrefix,
      jwtSecret: randomBytes(32).toString("base64url")
    }
  })

/** The environment of an engine program on `storage`, with the fast timing and `extra` on top. */
export const engineEnv = (storage: EngineStorage, extra: Readonly<Record<string, string>> = {}) =>
  childEnv({
    DATABASE_URL: storage.databaseUrl,
    REDIS_URL: storage.redisUrl,
    REDIS_KEY_PREFIX: storage.redisPrefix,
    AUTH_JWT_SECRET: storage.jwtSecret,
    // The synthetic provider needs no key, but the platform credential must resolve to one.
    AI_GATEWAY: "synthetic",
    AI_API_KEY: "synthetic-provider-needs-no-key",
    MIGRATE_ON_START: "false",
    ...fastTiming,
    ...extra
  })

export type EntryPoint = "all-in-one" | "api" | "worker" | "dispatcher"

/** Fetches `url`; any network error is a `ProcessTestError`. */
export const httpRequest = (
  method: string,
  url: string,
  options: { readonly token?: string; readonly body?: unknown } = {}
) =>
  Effect.tryPromise({
    try: async () => {
      const headers: Record<string, string> = {}
      if (options.token !== undefined) headers["authorization"] = `Bearer ${options.token}`
      if (options.body !== undefined) headers["content-type"] = "application/json"
      const response = await fetch(url, {
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal: AbortSignal.timeout(10_000)
      })
      const text = await response.text()
      return { status: response.status, text }
    },
    catch: (error) => new ProcessTestError({ message: `${method} ${url}: ${String(error)}` })
  })

/** Decodes a JSON body with `schema`; a mismatch fails with the status and the body. */
export const decodeBody =
  <A, I>(schema: Schema.Schema<A, I>) => (response: { readonly status: number; readonly text: string }) =>
    Schema.decodeUnknown(Schema.parseJson(schema))(response.text).pipe(
      Effect.mapError((error) =>
        new ProcessTestError({ message: `unexpected body (${response.status}) ${response.text}: ${error.message}` })
      )
    )

/** Polls `/healthz` until it answers 200; fails early (with the output) if the program exits. */
export const awaitHealthy = (
  program: ChildProgram,
  baseUrl: string,
  timeout: Duration.DurationInput = Duration.seconds(30)
) =>
  Effect.gen(function*() {
    while (true) {
      const exited = yield* program.exitNow
      if (exited._tag === "Some") {
        return yield* new ProcessTestError({
          message: `${program.name} exited (${JSON.stringify(exited.value)}) before it was healthy\n${program.tail()}`
        })
      }
      const answer = yield* Effect.either(httpRequest("GET", `${baseUrl}/healthz`))
      if (answer._tag === "Right" && answer.right.status === 200) return
      yield* Effect.sleep(Duration.millis(100))
    }
  }).pipe(
    Effect.timeoutFail({
      duration: timeout,
      onTimeout: () => new ProcessTestError({ message: `${program.name} not healthy at ${baseUrl}\n${program.tail()}` })
    })
  )

export interface RunningProgram extends ChildProgram {
  /** `http://127.0.0.1:{PORT}` for programs that serve HTTP. */
  readonly baseUrl: string
}

/**
 * Starts `src/main/{entry}.ts` with `env` (a free `PORT` is added). Programs that serve HTTP
 * are awaited until `/healthz` answers; the others until `ready` (a log line) appears.
 */
export const startProgram = (
  entry: EntryPoint,
  name: string,
  env: NodeJS.ProcessEnv,
  options: { readonly ready?: RegExp; readonly nodeOptions?: ReadonlyArray<string> } = {}
): Effect.Effect<RunningProgram, ProcessTestError, Scope.Scope> =>
  Effect.gen(function*() {
    const port = yield* freePort
    const [command, args] = nodeProgram(entry)
    const program = yield* spawnProgram(name, command, [...(options.nodeOptions ?? []), ...args], {
      ...env,
      PORT: String(port)
    })
    const baseUrl = `http://127.0.0.1:${port}`
    if (entry === "api" || entry === "all-in-one") yield* awaitHealthy(program, baseUrl)
    if (options.ready !== undefined) yield* program.waitForOutput(options.ready, Duration.seconds(30))
    return { ...program, baseUrl }
  })

/** A log line each program writes once it serves: the worker and the dispatcher. */
export const workerStarted = /worker started/
export const dispatcherStarted = /Outbox dispatcher started/

/** A token for `userId`, signed with the storage's secret. */
export const tokenFor = (storage: EngineStorage, userId: string, role: Role = "USER") =>
  signToken({ sub: userId, role, expiresInSeconds: 3600 }, Redacted.make(storage.jwtSecret))

export const flashcardRequest = (index: number) => ({
  sourceText:
    `Item ${index}: photosynthesis turns light into chemical energy. Chlorophyll absorbs light. Plants release oxygen.`,
  count: 3
})

export const feynmanRequest = (index: number) => ({
  concept: `concept ${index}`,
  explanation: "Energy is conserved: it changes form but the total stays the same."
})

/** POST a creation; expects 202 and returns the new job. */
export const createJob = (
  baseUrl: string,
  token: string,
  route: "flashcard-generations" | "feynman-evaluations",
  body: unknown
) =>
  Effect.gen(function*() {
    const response = yield* httpRequest("POST", `${baseUrl}/api/ai/${route}`, { token, body })
    if (response.status !== 202) {
      return yield* new ProcessTestError({ message: `create ${route}: ${response.status} ${response.text}` })
    }
    return yield* decodeBody(JobStatusResponse)(response)
  })

export const getJob = (baseUrl: string, token: string, jobId: string) =>
  httpRequest("GET", `${baseUrl}/api/ai/jobs/${jobId}`, { token }).pipe(Effect.flatMap(decodeBody(JobStatusResponse)))

export const getArtifacts = (baseUrl: string, token: string, jobId: string) =>
  httpRequest("GET", `${baseUrl}/api/ai/jobs/${jobId}/artifacts`, { token }).pipe(
    Effect.flatMap(decodeBody(JobArtifactsResponse))
  )

/** RESOLVE is done: the job is in EXECUTE (the synthetic provider's latency) or later. */
/**
 * Locked by a worker. Progress reaches the row only with the next heartbeat, so callers that
 * need the provider call under way wait `executeSettleMs` more (the synthetic latency holds
 * the job in EXECUTE far longer).
 */
export const inExecute = (job: JobStatusResponse) => job.lifecycleStatus === "running"

export const executeSettleMs = 1_000

const terminal: ReadonlyArray<LifecycleStatus> = ["succeeded", "failed", "cancelled"]

/** Polls the job until it is terminal (or `until` holds); fails after `timeout` with the last view. */
export const pollJob = (
  baseUrl: string,
  token: string,
  jobId: string,
  options: {
    readonly timeout?: Duration.DurationInput
    readonly every?: Duration.DurationInput
    readonly until?: (job: JobStatusResponse) => boolean
  } = {}
) =>
  Effect.gen(function*() {
    const until = options.until ?? ((job: JobStatusResponse) => terminal.includes(job.lifecycleStatus))
    let last: JobStatusResponse | undefined
    const loop = Effect.gen(function*() {
      while (true) {
        last = yield* getJob(baseUrl, token, jobId)
        if (until(last)) return last
        if (terminal.includes(last.lifecycleStatus)) {
          return yield* new ProcessTestError({
            message: `job ${jobId} ended without meeting the condition: ${JSON.stringify(last)}`
          })
        }
        yield* Effect.sleep(options.every ?? Duration.millis(100))
      }
    })
    const timeout = options.timeout ?? Duration.seconds(30)
    return yield* loop.pipe(
      Effect.timeoutFail({
        duration: timeout,
        onTimeout: () =>
          new ProcessTestError({
            message: `job ${jobId} not done within ${Duration.format(timeout)}; last: ${JSON.stringify(last)}`
          })
      })
    )
  })

/** Runs `effect` with a small pool on `storage`'s database. */
export const withDatabase = <A, E>(storage: EngineStorage, effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  effect.pipe(Effect.provide(mysqlClientLayer(Redacted.make(storage.databaseUrl), { maxConnections: 2 })))

/** Rows of a query, decoded (the pool camelCases column names). */
export const queryRows = <A, I>(
  schema: Schema.Schema<A, I>,
  query: string,
  params: ReadonlyArray<string | number> = []
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql.unsafe(query, params)
    return yield* Schema.decodeUnknown(Schema.Array(schema))(rows)
  })

/** The lease columns of one job, straight from MySQL. */
export const LeaseRow = Schema.Struct({
  lifecycleStatus: Schema.String,
  attemptCount: Schema.Number,
  lockedBy: Schema.NullOr(Schema.String),
  lockUntil: Schema.NullOr(Schema.DateFromSelf)
})

export const leaseOf = (storage: EngineStorage, jobId: string) =>
  withDatabase(
    storage,
    queryRows(LeaseRow, "SELECT lifecycle_status, attempt_count, locked_by, lock_until FROM ai_job WHERE id = ?", [
      jobId
    ])
  ).pipe(
    Effect.flatMap((rows) =>
      rows[0] === undefined
        ? Effect.fail(new ProcessTestError({ message: `no ai_job row ${jobId}` }))
        : Effect.succeed(rows[0])
    )
  )

/** Polls MySQL until `predicate` holds for the job's lease row. */
export const awaitLease = (
  storage: EngineStorage,
  jobId: string,
  predicate: (row: typeof LeaseRow.Type) => boolean,
  timeout: Duration.DurationInput
) =>
  Effect.gen(function*() {
    let last: typeof LeaseRow.Type | undefined
    return yield* Effect.gen(function*() {
      while (true) {
        last = yield* leaseOf(storage, jobId)
        if (predicate(last)) return last
        yield* Effect.sleep(Duration.millis(50))
      }
    }).pipe(
      Effect.timeoutFail({
        duration: timeout,
        onTimeout: () =>
          new ProcessTestError({ message: `job ${jobId}: lease condition not met; last ${JSON.stringify(last)}` })
      })
    )
  })

/** Artifact and business-row counts per job, for "exactly one set of artifacts". */
export const ArtifactCount = Schema.Struct({
  jobId: Schema.String,
  artifacts: Schema.Number,
  distinctOrdinals: Schema.Number
})
export const artifactCounts = (storage: EngineStorage) =>
  withDatabase(
    storage,
    queryRows(
      ArtifactCount,
      "SELECT job_id, COUNT(*) AS artifacts, COUNT(DISTINCT ordinal) AS distinct_ordinals FROM ai_job_artifact GROUP BY job_id"
    )
  )

export const JobRowCount = Schema.Struct({ jobId: Schema.String, n: Schema.Number })
