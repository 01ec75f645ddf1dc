import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Duration, Effect, Layer, Option, Redacted, Schema, type Scope } from "effect"
import { createServer } from "node:http"
import { ApiSettings } from "../../../src/config/ApiSettings.js"
import { AuthSettings } from "../../../src/config/AuthSettings.js"
import { ProviderConfig } from "../../../src/config/EngineConfig.js"
import { TimingConfig } from "../../../src/config/EngineConfig.js"
import {
  defaultHttpTransport,
  type HttpTransportSettings,
  nodeServerOptions
} from "../../../src/config/HttpTransportSettings.js"
import type { LiveStreamSettings } from "../../../src/config/LiveStreamSettings.js"
import { QueueSettings } from "../../../src/config/QueueSettings.js"
import type { QuotaLimits } from "../../../src/config/QuotaLimitsConfig.js"
import { type AiJob, byLease, leaseOf } from "../../../src/domain/AiJob.js"
import { type Role, signToken } from "../../../src/http/AuthTokens.js"
import { apiServer } from "../../../src/http/server.js"
import { JobCatalogLive } from "../../../src/jobs/JobCatalogLive.js"
import { InProcessCancelSignal } from "../../../src/layers/memory/InProcessCancelSignal.js"
import { InProcessJobEvents } from "../../../src/layers/memory/InProcessJobEvents.js"
import { InProcessOutboxSignal } from "../../../src/layers/memory/InProcessOutboxSignal.js"
import { MemoryArtifactRepository } from "../../../src/layers/memory/MemoryArtifactRepository.js"
import { MemoryJobQueueLive } from "../../../src/layers/memory/MemoryJobQueue.js"
import { MemoryJobStatistics } from "../../../src/layers/memory/MemoryJobStatistics.js"
import { MemoryProjectionStore } from "../../../src/layers/memory/MemoryProjectionStore.js"
import { ReadinessProbeMemory } from "../../../src/layers/memory/MemoryReadinessProbe.js"
import { MemoryUsageLogRepository } from "../../../src/layers/memory/MemoryUsageLogRepository.js"
import { MemoryWorkerDirectory } from "../../../src/layers/memory/MemoryWorkerDirectory.js"
import { MemoryBreakers } from "../../../src/main/AppLayers.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { ArtifactRepository } from "../../../src/services/ArtifactRepository.js"
import { CredentialVault, makeKeyring } from "../../../src/services/CredentialVault.js"
import { JobDefinitionRegistry } from "../../../src/services/JobDefinitionRegistry.js"
import { ModelRouter } from "../../../src/services/ModelRouter.js"
import { OutboxAdmin } from "../../../src/services/outbox/OutboxAdmin.js"
import type { ReadinessProbe } from "../../../src/services/ReadinessProbe.js"
import { ResultProjectors } from "../../../src/services/ResultProjectors.js"
import { SnapshotBuilder } from "../../../src/services/SnapshotBuilder.js"
import { UnitOfWork } from "../../../src/services/UnitOfWork.js"
import { memoryRepositoriesWith } from "../../support/foundationStack.js"
import { type Exchange, type ResponseValidator, responseValidatorFor, tapResponses } from "./openApiValidation.js"

export const jwtSecret = "http-test-secret-0123456789abcdefghijklmnop"
export const runtimeToken = "runtime-service-token-0123456789abcdefghij"
export const encryptionKey = Buffer.alloc(32, 7).toString("base64")

/** A vault with one key version and no platform key. Needs a `CredentialRepository`. */
export const testVault = CredentialVault.withOptions({
  keyring: makeKeyring(Option.some({ version: 1, key: Redacted.make(encryptionKey) })),
  platformKey: Option.none()
})

/** Every engine service the API needs, in memory, plus `MemoryDatabase` for inspection. */
export const memoryEngine = (limits: Partial<QuotaLimits> = {}) => {
  const repositories = memoryRepositoriesWith({ maxActiveJobsPerUser: 10_000, dailyJobQuota: 10_000, ...limits })
  const stores = Layer.mergeAll(
    MemoryProjectionStore,
    MemoryArtifactRepository,
    InProcessOutboxSignal,
    InProcessCancelSignal,
    InProcessJobEvents,
    MemoryWorkerDirectory,
    MemoryUsageLogRepository,
    MemoryJobStatistics,
    MemoryJobQueueLive.pipe(Layer.provide(QueueSettings.make())),
    SnapshotBuilder.Default.pipe(Layer.provide(TimingConfig.make()))
  ).pipe(Layer.provideMerge(repositories))
  return Layer.mergeAll(
    AiJobService.Default,
    OutboxAdmin.Default,
    testVault,
    // The stats page shows each routed provider's circuit breaker.
    ModelRouter.Default.pipe(Layer.provide(ProviderConfig.layer)),
    MemoryBreakers
  ).pipe(
    Layer.provideMerge(JobCatalogLive.pipe(Layer.provideMerge(stores)))
  )
}

export interface TestResponse {
  readonly status: number
  readonly text: string
  /** The parsed JSON body; `undefined` when there is none. */
  readonly body: unknown
  readonly headers: Headers
}

export interface RequestOptions {
  /** A bearer token; `undefined` sends no Authorization header. */
  readonly token?: string | undefined
  /** The Authorization header verbatim (wins over `token`). */
  readonly authorization?: string | undefined
  readonly body?: unknown
  /** A body sent as is, with `content-type: application/json` unless `headers` names another. */
  readonly rawBody?: string | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
}

const parse = (text: string): unknown => {
  if (text.length === 0) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

export const request = (baseUrl: string, method: string, path: string, options: RequestOptions = {}) =>
  Effect.promise(async (): Promise<TestResponse> => {
    const headers: Record<string, string> = { ...options.headers }
    const authorization = options.authorization ?? (options.token === undefined ? undefined : `Bearer ${options.token}`)
    if (authorization !== undefined) headers["authorization"] = authorization
    let body: string | undefined
    if (options.rawBody !== undefined) body = options.rawBody
    else if (options.body !== undefined) body = JSON.stringify(options.body)
    if (body !== undefined) headers["content-type"] ??= "application/json"
    const response = await fetch(`${baseUrl}${path}`, { method, headers, body })
    const text = await response.text()
    return { status: response.status, text, body: parse(text), headers: response.headers }
  })

/** Decodes a response body in a test, failing the test with the body when it does not match. */
export const bodyAs = <A, I>(schema: Schema.Schema<A, I>) => (response: TestResponse) =>
  Schema.decodeUnknown(schema)(response.body).pipe(
    Effect.orDieWith((error) => new Error(`unexpected body (${response.status}) ${response.text}: ${error.message}`))
  )

export const ErrorBody = Schema.Struct({ code: Schema.String, message: Schema.String })

export const JobBody = Schema.Struct({
  jobId: Schema.String,
  jobType: Schema.String,
  lifecycleStatus: Schema.String,
  queueName: Schema.String,
  priority: Schema.Number,
  progress: Schema.Number,
  createdAt: Schema.String,
  startedAt: Schema.optional(Schema.String),
  finishedAt: Schema.optional(Schema.String),
  errorCode: Schema.optional(Schema.String),
  publicErrorMessage: Schema.optional(Schema.String),
  internalErrorMessage: Schema.optional(Schema.String),
  result: Schema.optional(
    Schema.Struct({
      artifactCount: Schema.Number,
      artifacts: Schema.Array(Schema.Struct({ artifactType: Schema.String, artifactId: Schema.String }))
    })
  )
})

/** The frozen `JobStatusResponse`'s fields: an answer may leave optional ones out, never add one. */
export const frozenKeys: ReadonlyArray<string> = [
  "jobId",
  "jobType",
  "lifecycleStatus",
  "queueName",
  "priority",
  "progress",
  "createdAt",
  "startedAt",
  "finishedAt",
  "errorCode",
  "publicErrorMessage",
  "result"
]

export const PageBody = Schema.Struct({ items: Schema.Array(JobBody), nextCursor: Schema.NullOr(Schema.String) })

export interface ApiHarnessOptions<ROut = never> {
  /** Who signs tokens; the test secret (`jwtSecret`) only, unless given. */
  readonly auth?: Parameters<typeof AuthSettings.make>[0]
  /** Caps and life of streams and long polls; the defaults otherwise. */
  readonly liveStreams?: Partial<LiveStreamSettings>
  readonly platformEnabled?: boolean
  readonly runtimeServiceToken?: string | undefined
  readonly probe?: Layer.Layer<ReadinessProbe, never, NoInfer<ROut>>
  /** Body limit, timeouts, CORS origins; the defaults otherwise. */
  readonly transport?: Partial<HttpTransportSettings>
}

/**
 * Checks every answer the server sends against the `/openapi.json` it serves
 * (`./openApiValidation.ts`): answers are held until the document has been read, then checked
 * as they finish. When the scope closes (after the server has stopped), any mismatch fails it,
 * listing each answer and what is wrong with it.
 */
export const validatedAgainstOwnDocument = Effect.gen(function*() {
  const mismatches: Array<string> = []
  const waiting: Array<Exchange> = []
  let validator: ResponseValidator | undefined
  const check = (current: ResponseValidator, exchange: Exchange) => {
    const problems = current.check(exchange)
    if (problems.length > 0) {
      mismatches.push(`${exchange.method} ${exchange.url} → ${exchange.status}: ${problems.join("; ")}`)
    }
  }
  yield* Effect.addFinalizer(() =>
    mismatches.length === 0
      ? Effect.void
      : Effect.die(new Error(`answers that do not match /openapi.json:\n  ${mismatches.join("\n  ")}`))
  )
  return {
    onExchange: (exchange: Exchange) => {
      if (validator === undefined) waiting.push(exchange)
      else check(validator, exchange)
    },
    /** Reads the served document and checks what was held back. */
    start: (baseUrl: string) =>
      Effect.promise(async () => {
        const response = await fetch(`${baseUrl}/openapi.json`)
        const current = responseValidatorFor(await response.text())
        validator = current
        for (const exchange of waiting.splice(0)) check(current, exchange)
      })
  }
})

/**
 * The API on a real Node server on 127.0.0.1 (a free port) over `engine`, every answer checked
 * against the served `/openapi.json`. Returns the base URL, helpers, and the built context so a
 * test can reach the engine's services directly.
 */
export const startApi = <ROut, E>(
  engine: Layer.Layer<ROut, E>,
  options: ApiHarnessOptions<ROut> = {}
) =>
  Effect.gen(function*() {
    const transport = { ...defaultHttpTransport, ...options.transport }
    const settings = Layer.merge(
      ApiSettings.make({
        runtimeServiceToken: "runtimeServiceToken" in options ? options.runtimeServiceToken : runtimeToken,
        platformEnabled: options.platformEnabled ?? true,
        transport,
        liveStreams: options.liveStreams
      }),
      AuthSettings.make(options.auth ?? { jwtSecret })
    )
    const validation = yield* validatedAgainstOwnDocument
    const nodeServer = NodeHttpServer.layer(
      () => tapResponses(createServer(nodeServerOptions(transport)), validation.onExchange),
      { port: 0, host: "127.0.0.1" }
    )
    const server = apiServer().pipe(
      Layer.provideMerge(nodeServer),
      Layer.provideMerge(Layer.merge(settings, options.probe ?? ReadinessProbeMemory)),
      Layer.provideMerge(engine)
    )
    const context = yield* Layer.build(server)
    const address = Context.get(context, HttpServer.HttpServer).address
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("expected a TCP address")
    const baseUrl = `http://127.0.0.1:${address.port}`
    yield* validation.start(baseUrl)
    return {
      baseUrl,
      context,
      request: (method: string, path: string, requestOptions?: RequestOptions) =>
        request(baseUrl, method, path, requestOptions),
      /** Runs `effect` against the engine behind the server. */
      run: <A, E2>(effect: Effect.Effect<A, E2, ROut>) => Effect.provide(effect, context)
    }
  })

export interface TestApiShape {
  readonly baseUrl: string
  readonly request: (method: string, path: string, options?: RequestOptions) => Effect.Effect<TestResponse>
}

/** The running API as a service, for `layer(...)` blocks that share one server. */
export class TestApi extends Context.Tag("test/http/TestApi")<TestApi, TestApiShape>() {}

/** One server for a whole block: provides `TestApi` and every service of `engine`. */
export const apiLayer = <ROut, E>(engine: Layer.Layer<ROut, E>, options: ApiHarnessOptions<ROut> = {}) =>
  Layer.scopedContext(
    Effect.map(
      startApi(engine, options),
      (api) => Context.add(api.context, TestApi, { baseUrl: api.baseUrl, request: api.request })
    )
  )

/** Mints a token signed with the test secret (real clock). */
export const tokenFor = (sub: string, role: Role = "USER", expiresInSeconds = 3600) =>
  signToken({ sub, role, expiresInSeconds }, Redacted.make(jwtSecret))

export const withScope = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, Scope.Scope>> =>
  Effect.scoped(effect)

export const flashcardBody = (overrides: Readonly<Record<string, unknown>> = {}) => ({
  sourceText: "Photosynthesis turns light, water and carbon dioxide into glucose and oxygen.",
  count: 3,
  ...overrides
})

export const feynmanBody = (overrides: Readonly<Record<string, unknown>> = {}) => ({
  concept: "photosynthesis",
  explanation: "Plants use sunlight to turn water and air into sugar, and breathe out oxygen.",
  ...overrides
})

/** Two evaluation results, as a client copies them from its feynman_evaluation jobs' artifacts. */
export const learningAnalysisBody = (overrides: Readonly<Record<string, unknown>> = {}) => ({
  evaluations: [
    { evaluationId: "eval-1", concept: "photosynthesis", score: 85, gaps: [] },
    {
      evaluationId: "eval-2",
      concept: "cellular respiration",
      score: 40,
      gaps: ["no concrete example", "does not mention \"mitochondria\""]
    }
  ],
  ...overrides
})

// ---------------------------------------------------------------------------------------------
// Driving jobs through their lifecycle without the engine (what a worker would do).

type EngineServices =
  | AiJobLifecycleRepository
  | ArtifactRepository
  | ResultProjectors
  | JobDefinitionRegistry
  | UnitOfWork

const findJob = (jobId: string) =>
  Effect.flatMap(AiJobLifecycleRepository, (repo) => repo.findById(jobId)).pipe(
    Effect.flatMap(Option.match({ onNone: () => Effect.dieMessage(`job ${jobId} not found`), onSome: Effect.succeed })),
    Effect.orDie
  )

export const markRunning = (jobId: string): Effect.Effect<AiJob, never, EngineServices> =>
  Effect.flatMap(AiJobLifecycleRepository, (repo) => repo.lockJob(jobId, "test-worker", Duration.millis(60_000))).pipe(
    Effect.orDie
  )

const leaseFor = (job: AiJob) =>
  Option.match(Option.fromNullable(leaseOf(job)), {
    onNone: () => Effect.dieMessage(`job ${job.id} is not running`),
    onSome: Effect.succeed
  })

/** Locks, projects `output` with the job type's projector and marks the job succeeded. */
export const markSucceeded = (jobId: string, output: unknown): Effect.Effect<AiJob, never, EngineServices> =>
  Effect.gen(function*() {
    const repo = yield* AiJobLifecycleRepository
    const artifacts = yield* ArtifactRepository
    const registry = yield* JobDefinitionRegistry
    const projectors = yield* ResultProjectors
    const unitOfWork = yield* UnitOfWork
    const running = yield* markRunning(jobId)
    const lease = yield* leaseFor(running)
    const registered = yield* registry.get(running.jobType)
    const projector = yield* projectors.get(registered.definition.projector ?? "")
    return yield* unitOfWork.transaction(
      Effect.gen(function*() {
        const result = yield* projector.project(running, output)
        yield* artifacts.record(running.id, result.artifacts)
        return yield* repo.markSucceeded(lease, "0".repeat(64), { locked: running })
      })
    )
  }).pipe(Effect.orDie)

export const markFailed = (
  jobId: string,
  failure: { readonly errorCode: string; readonly publicErrorMessage: string; readonly internalErrorMessage: string }
): Effect.Effect<AiJob, never, EngineServices> =>
  Effect.gen(function*() {
    const repo = yield* AiJobLifecycleRepository
    const running = yield* markRunning(jobId)
    const lease = yield* leaseFor(running)
    return yield* repo.markFailed(byLease(lease), failure)
  }).pipe(Effect.orDie)

export const jobById = findJob
