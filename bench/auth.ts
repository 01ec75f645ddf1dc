/**
 * `npm run bench:auth`: what checking a bearer token costs per request, the HS256 secret against
 * an identity provider's RS256, ES256 and EdDSA tokens (docs/architecture.md §15.8).
 * 1. Verification alone, in this process with the keys cached (fetched once from a provider
 *    served here on 127.0.0.1): a token's first sight (every check, `verifyBearer`) and a token
 *    seen again (`TokenVerifier.verify`, which remembers what it accepted), the median of
 *    `BENCH_AUTH_ROUNDS` rounds of `BENCH_AUTH_ITERATIONS` tokens, in CPU µs per token (user +
 *    system: other processes on the machine do not inflate it); jose's `jwtVerify` beside them
 *    (its WebCrypto threads included).
 * 2. The status read: `GET /api/ai/jobs/:jobId` on the engine's API (a child process on MySQL
 *    and Redis, accepting both kinds of token) under autocannon for `BENCH_AUTH_HTTP_SECONDS`
 *    per token kind, HS256 first and again last (their spread is the noise): the server's CPU per
 *    request and requests per second (0 s skips it).
 * Prints the figures and writes bench/results/auth.json.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Config, Effect, Either, Layer, Logger, LogLevel, Option, Redacted } from "effect"
import { createLocalJWKSet, jwtVerify } from "jose"
import { createSecretKey } from "node:crypto"
import { mkdir, writeFile } from "node:fs/promises"
import { fileURLToPath } from "node:url"
import { AuthSettings } from "../src/config/AuthSettings.js"
import { hs256KeyOf, signToken } from "../src/http/AuthTokens.js"
import { identityTokenPolicy } from "../src/http/identityTokens.js"
import { TokenVerifier, verifyBearer } from "../src/http/TokenVerifier.js"
import { makeSigningKey, signWith, startIdentityProvider } from "../test/support/identityProvider.js"
import { benchJwtSecret } from "./engineStack.js"
import { type HttpRun, runStatusReads } from "./http.js"
import { redisNamespace, scratchDatabase } from "./infra.js"
import { cpuMicros } from "./procStat.js"
import { median, ratio, round } from "./stats.js"

const resultsFile = fileURLToPath(new URL("./results/auth.json", import.meta.url))
const step = (label: string) => Effect.sync(() => process.stderr.write(`bench:auth: ${label}\n`))

const settings = Config.all({
  serverUrl: Config.string("BENCH_DATABASE_URL").pipe(Config.withDefault("mysql://root@127.0.0.1:3306/test")),
  redisUrl: Config.string("BENCH_REDIS_URL").pipe(Config.withDefault("redis://127.0.0.1:6379")),
  iterations: Config.integer("BENCH_AUTH_ITERATIONS").pipe(Config.withDefault(20_000)),
  rounds: Config.integer("BENCH_AUTH_ROUNDS").pipe(Config.withDefault(5)),
  httpSeconds: Config.integer("BENCH_AUTH_HTTP_SECONDS").pipe(Config.withDefault(5)),
  connections: Config.integer("BENCH_CONNECTIONS").pipe(Config.withDefault(10))
})

const audience = "ai-job-engine"
const userId = "bench-auth-user"
const keys = [makeSigningKey("RS256", "rsa-1"), makeSigningKey("ES256", "ec-1"), makeSigningKey("EdDSA", "ed-1")]

/** CPU µs per call of `run`, `iterations` times in a row; the median of `rounds` rounds. */
const microsPerCall = (run: () => unknown, iterations: number, rounds: number) => {
  const perRound: Array<number> = []
  for (let round = 0; round < rounds; round++) {
    const started = cpuMicros()
    for (let i = 0; i < iterations; i++) run()
    perRound.push((cpuMicros() - started) / iterations)
  }
  return round(median(perRound), 2)
}

const microsPerAsyncCall = (run: () => Promise<unknown>, iterations: number, rounds: number) =>
  Effect.promise(async () => {
    const perRound: Array<number> = []
    for (let round = 0; round < rounds; round++) {
      const started = cpuMicros()
      for (let i = 0; i < iterations; i++) await run()
      perRound.push((cpuMicros() - started) / iterations)
    }
    return round(median(perRound), 2)
  })

const program = Effect.gen(function*() {
  const s = yield* settings
  const idp = yield* startIdentityProvider(keys)
  const expiresInSeconds = 3600
  const exp = Math.floor(Date.now() / 1000) + expiresInSeconds
  const tokens: ReadonlyArray<readonly [string, string]> = [
    ["HS256", yield* signToken({ sub: userId, role: "USER", expiresInSeconds }, Redacted.make(benchJwtSecret))],
    ...(yield* Effect.forEach(
      keys,
      (key) =>
        Effect.map(
          signWith(key, { iss: idp.issuer, aud: audience, sub: userId, exp }),
          (token) => [key.alg, token] as const
        )
    ))
  ]

  yield* step(`verification alone: ${s.rounds} rounds of ${s.iterations} tokens per kind`)
  const authSettings = AuthSettings.make({
    jwtSecret: benchJwtSecret,
    identityProvider: { issuer: idp.issuer, audiences: [audience] }
  })
  const verifier = yield* Effect.provide(
    TokenVerifier,
    yield* Layer.build(TokenVerifier.Default.pipe(Layer.provide(authSettings)))
  )
  // The first provider token fetches the keys; every later one uses them.
  for (const [, token] of tokens) yield* verifier.verify(token)
  const fetched = idp.served()
  // A token's first sight: every check, as `verifyBearer` makes it with the keys the verifier holds.
  const identityProvider = Option.getOrThrow((yield* Effect.provide(AuthSettings, authSettings)).identityProvider)
  const firstSight = {
    hs256Key: hs256KeyOf(Redacted.make(benchJwtSecret)),
    identityProvider: {
      policy: identityTokenPolicy(identityProvider),
      keys: yield* Option.getOrThrow(verifier.identityProviderKeys).current(Date.now())
    }
  }
  const jwks = createLocalJWKSet({ keys: keys.map((key) => ({ ...key.jwk })) })
  const secretKey = createSecretKey(Buffer.from(benchJwtSecret, "utf8"))
  const verification: Array<
    {
      readonly kind: string
      readonly firstSightMicros: number
      readonly engineMicros: number
      readonly joseMicros: number
    }
  > = []
  for (const [kind, token] of tokens) {
    const firstSightMicros = microsPerCall(
      () => {
        if (Either.isLeft(verifyBearer(token, { ...firstSight, nowMillis: Date.now() }))) {
          throw new Error(`${kind} refused`)
        }
      },
      s.iterations,
      s.rounds
    )
    const engineMicros = microsPerCall(() => Effect.runSync(verifier.verify(token)), s.iterations, s.rounds)
    const joseMicros = yield* microsPerAsyncCall(
      () =>
        kind === "HS256"
          ? jwtVerify(token, secretKey, { algorithms: ["HS256"], requiredClaims: ["sub", "exp"] })
          : jwtVerify(token, jwks, {
            issuer: idp.issuer,
            audience,
            algorithms: ["RS256", "ES256", "EdDSA"],
            requiredClaims: ["sub", "exp"]
          }),
      Math.max(1, Math.floor(s.iterations / 4)),
      s.rounds
    )
    verification.push({ kind, firstSightMicros, engineMicros, joseMicros })
  }
  const hs256Micros = verification[0]?.engineMicros ?? 0
  const verificationWithRatio = verification.map((row) => ({
    ...row,
    timesHs256: ratio(row.engineMicros, hs256Micros, 1)
  }))
  const afterVerification = idp.served()

  let statusRead: ReadonlyArray<HttpRun & { readonly kind: string; readonly extraCpuMsPerRequest: number }> = []
  if (s.httpSeconds > 0) {
    yield* step(`status read: GET /api/ai/jobs/:jobId, ${s.httpSeconds} s per token kind, ${s.connections} connections`)
    const database = yield* scratchDatabase(s.serverUrl)
    const redisPrefix = yield* redisNamespace(s.redisUrl)
    const runs = yield* runStatusReads({
      mode: "engine",
      target: { ...database, redisUrl: s.redisUrl, redisPrefix },
      identityProvider: { issuer: idp.issuer, audience },
      job: { create: { sourceText: "Photosynthesis turns light into chemical energy.", count: 3 } },
      // HS256 first and last: the spread between its two runs is the noise the other kinds are read against.
      tokens: [...tokens, ...tokens.slice(0, 1)].map(([, token]) => token),
      connections: s.connections,
      seconds: s.httpSeconds
    })
    const hs256Cpu = runs[0]?.cpuMsPerRequest ?? 0
    statusRead = runs.map((run, i) => ({
      ...run,
      kind: i < tokens.length ? tokens[i]?.[0] ?? "?" : "HS256 again",
      extraCpuMsPerRequest: round(run.cpuMsPerRequest - hs256Cpu, 3)
    }))
  }

  const results = {
    at: new Date().toISOString(),
    verification: verificationWithRatio,
    keySetFetches: {
      afterFirstTokens: fetched,
      afterVerification,
      verifications: s.iterations * s.rounds * tokens.length
    },
    statusRead
  }
  yield* Effect.promise(() => mkdir(fileURLToPath(new URL("./results/", import.meta.url)), { recursive: true }))
  yield* Effect.promise(() => writeFile(resultsFile, JSON.stringify(results, null, 2)))
  const lines = [
    "",
    "Bearer token verification per request (CPU µs, median of rounds; keys cached): a token's first sight, every",
    "request of a client after it (the verifier remembers what it accepted), jose's jwtVerify",
    ...verificationWithRatio.map((row) =>
      `  ${row.kind.padEnd(6)} first sight ${String(row.firstSightMicros).padStart(7)} µs   seen again ${
        String(row.engineMicros).padStart(7)
      } µs (${row.timesHs256} × HS256)   jose ${String(row.joseMicros).padStart(7)} µs`
    ),
    `  key set fetched ${afterVerification.jwks} time(s) in ${results.keySetFetches.verifications} verifications`,
    ...(statusRead.length === 0
      ? []
      : [
        "",
        "GET /api/ai/jobs/:jobId on the engine's API (server CPU per request; extra over HS256)",
        ...statusRead.map((run) =>
          `  ${run.kind.padEnd(11)} ${
            String(run.requestsPerSecond).padStart(6)
          } req/s  p50 ${run.latencyP50Ms} ms  p99 ${run.latencyP99Ms} ms  CPU ${run.cpuMsPerRequest} ms/req (${
            run.extraCpuMsPerRequest >= 0 ? "+" : ""
          }${run.extraCpuMsPerRequest})  non-2xx ${run.non2xx}`
        )
      ]),
    `results: ${resultsFile}`
  ]
  yield* Effect.sync(() => process.stdout.write(`${lines.join("\n")}\n`))
}).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning))

NodeRuntime.runMain(program)
