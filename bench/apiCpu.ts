/**
 * `npm run bench:api-cpu`: the API program alone (the built `dist/api.js`, no dispatcher and no
 * workers: its jobs stay queued) on the local MariaDB and Redis, fed over HTTP by the typed client
 * as `bench:processes` feeds it. Its CPU per job (user + system, from /proc) for single creates
 * (`BENCH_API_CPU_PRODUCERS` at once), batch creates (`BENCH_API_CPU_BATCH_SIZE` jobs a request,
 * `BENCH_API_CPU_BATCH_PRODUCERS` at once) and status reads (autocannon on one job), each round
 * as long as the warm-up before it, `BENCH_API_CPU_ROUNDS` rounds. CPU per job, not wall time:
 * the figure to hold an API change against when the whole `bench:processes` run is too noisy.
 *
 * `BENCH_API_CPU_PROGRAMS=a.js,b.js` runs two builds side by side (a copy of `dist/api.js` from
 * before a change, say), each on its own scratch database, their rounds taken in turn so both see
 * the same load on a shared machine; it prints each one's median and the median of the per-round
 * ratios b / a. `BENCH_API_CPU_SCENARIOS=batch` (or `single`, `read`) runs some kinds only; with
 * `BENCH_API_CPU_PROF=<dir>` each API writes its V8 CPU profile there when it stops, and the
 * measured windows are printed on the profile's clock (microseconds) so a summary can keep to them.
 * Figures, not a test.
 */
import { FetchHttpClient } from "@effect/platform"
import { NodeRuntime } from "@effect/platform-node"
import autocannon from "autocannon"
import { Config, Duration, Effect, Schedule } from "effect"
import { makeAiJobClient } from "../src/http/client.js"
import { freePort, spawnProgram } from "../test/process/support/childProcess.js"
import { awaitHealthy, engineEnv, engineStorage, flashcardRequest, tokenFor } from "../test/process/support/engine.js"
import { processBenchEnv } from "./processEnv.js"
import { processUsage } from "./procStat.js"
import { median, round } from "./stats.js"

const step = (label: string) => Effect.sync(() => process.stderr.write(`bench:api-cpu: ${label}\n`))

const settings = Config.all({
  programs: Config.string("BENCH_API_CPU_PROGRAMS").pipe(Config.withDefault("dist/api.js")),
  rounds: Config.integer("BENCH_API_CPU_ROUNDS").pipe(Config.withDefault(5)),
  scenarios: Config.string("BENCH_API_CPU_SCENARIOS").pipe(Config.withDefault("single,batch,read")),
  singleJobs: Config.integer("BENCH_API_CPU_SINGLE_JOBS").pipe(Config.withDefault(500)),
  batchJobs: Config.integer("BENCH_API_CPU_BATCH_JOBS").pipe(Config.withDefault(3_000)),
  producers: Config.integer("BENCH_API_CPU_PRODUCERS").pipe(Config.withDefault(32)),
  batchSize: Config.integer("BENCH_API_CPU_BATCH_SIZE").pipe(Config.withDefault(100)),
  batchProducers: Config.integer("BENCH_API_CPU_BATCH_PRODUCERS").pipe(Config.withDefault(4)),
  users: Config.integer("BENCH_API_CPU_USERS").pipe(Config.withDefault(64)),
  readSeconds: Config.integer("BENCH_API_CPU_READ_SECONDS").pipe(Config.withDefault(4)),
  readConnections: Config.integer("BENCH_API_CPU_READ_CONNECTIONS").pipe(Config.withDefault(16)),
  cpuProfileDirectory: Config.string("BENCH_API_CPU_PROF").pipe(Config.withDefault(""))
})

type Scenario = "single" | "batch" | "read"

/** The profile's clock: V8 stamps samples with the system's monotonic clock, in microseconds. */
const monotonicMicros = () => Number(process.hrtime.bigint() / 1000n)

interface RoundFigure {
  readonly cpuMsPerJob: number
  readonly perSecond: number
  readonly window: readonly [number, number]
}

const program = Effect.gen(function*() {
  const s = yield* settings
  const scenarios = (["single", "batch", "read"] as const).filter((name) =>
    s.scenarios.split(",").map((part) => part.trim()).includes(name)
  )
  const programFiles = s.programs.split(",").map((file) => file.trim()).filter((file) => file !== "")
  const retry = Schedule.intersect(Schedule.exponential("50 millis"), Schedule.recurs(5))

  /** One API program on a scratch database of its own, and what drives it. */
  const startApi = (file: string, index: number) =>
    Effect.gen(function*() {
      const storage = yield* engineStorage(`bench_api_cpu_${index}`)
      const profiled = s.cpuProfileDirectory === ""
        ? []
        : ["--cpu-prof", `--cpu-prof-dir=${s.cpuProfileDirectory}`, `--cpu-prof-name=api-${index}.cpuprofile`]
      const port = yield* freePort
      const api = yield* spawnProgram("api", "node", [...profiled, file], {
        ...engineEnv(storage, {
          ...processBenchEnv
        }),
        PORT: String(port)
      })
      const baseUrl = `http://127.0.0.1:${port}`
      yield* awaitHealthy(api, baseUrl)
      const clients = yield* Effect.forEach(
        Array.from({ length: s.users }, (_, i) => i),
        (i) =>
          Effect.flatMap(tokenFor(storage, `bench-api-cpu-user-${i}`), (token) => makeAiJobClient({ baseUrl, token }))
      )
      let created = 0
      let requests = 0
      const clientOf = () => {
        const client = clients[requests++ % clients.length]
        return client === undefined ? Effect.dieMessage("no client") : Effect.succeed(client)
      }
      const create = Effect.suspend(() =>
        Effect.flatMap(clientOf(), (client) =>
          client.jobs.createFlashcardGeneration({ payload: flashcardRequest(created++), headers: {} }))
      ).pipe(Effect.retry(retry), Effect.asVoid, Effect.orDie)
      const createBatch = Effect.suspend(() => {
        const first = created
        created += s.batchSize
        const items = Array.from({ length: s.batchSize }, (_, k) =>
          flashcardRequest(first + k))
        return Effect.flatMap(clientOf(), (client) =>
          client.jobs.createFlashcardGenerationBatch({
            payload: { items },
            headers: { "idempotency-key": `bench-api-cpu-batch-${first}` }
          }))
      }).pipe(Effect.retry(retry), Effect.asVoid, Effect.orDie)
      const readToken = yield* tokenFor(storage, "bench-api-cpu-reader")
      const readJobId = yield* Effect.flatMap(
        makeAiJobClient({ baseUrl, token: readToken }),
        (client) => client.jobs.createFlashcardGeneration({ payload: flashcardRequest(0), headers: {} })
      ).pipe(Effect.map((job) => job.jobId), Effect.orDie)
      /** Status reads of one job under autocannon for `seconds`: how many were answered (every one a 200). */
      const reads = (seconds: number) =>
        Effect.async<number>((resume) => {
          const instance = autocannon({
            url: `${baseUrl}/api/ai/jobs/${encodeURIComponent(readJobId)}`,
            connections: s.readConnections,
            duration: seconds,
            headers: { authorization: `Bearer ${readToken}` }
          }, (error, result) =>
            resume(
              error !== null && error !== undefined
                ? Effect.die(error)
                : result.non2xx === 0
                ? Effect.succeed(result.requests.total)
                : Effect.dieMessage(`${result.non2xx} status reads were not answered 200`)
            ))
          return Effect.sync(() => instance.stop())
        })
      const batchRequests = Math.max(1, Math.round(s.batchJobs / s.batchSize))
      /** Runs one round of `scenario`: how many jobs (or reads) it made. */
      const drive = (scenario: Scenario): Effect.Effect<number> => {
        switch (scenario) {
          case "single":
            return Effect.as(
              Effect.forEach(Array.from({ length: s.singleJobs }), () => create, {
                concurrency: s.producers,
                discard: true
              }),
              s.singleJobs
            )
          case "batch":
            return Effect.as(
              Effect.forEach(Array.from({ length: batchRequests }), () => createBatch, {
                concurrency: s.batchProducers,
                discard: true
              }),
              batchRequests * s.batchSize
            )
          case "read":
            return reads(s.readSeconds)
        }
      }
      /** The API's CPU ms per job over one round, and the window it ran in on the profile's clock. */
      const measure = (scenario: Scenario) =>
        Effect.gen(function*() {
          const cpuBefore = processUsage(api.pid).cpuSeconds
          const began = monotonicMicros()
          const wallBegan = performance.now()
          const jobs = yield* drive(scenario)
          const cpuMs = (processUsage(api.pid).cpuSeconds - cpuBefore) * 1000
          return {
            cpuMsPerJob: round(cpuMs / jobs, 4),
            perSecond: round(jobs / ((performance.now() - wallBegan) / 1000), 1),
            window: [began, monotonicMicros()] as const
          } satisfies RoundFigure
        })
      return { file, api, drive, measure }
    })

  yield* step(`starting ${programFiles.join(", ")}`)
  const apis = yield* Effect.forEach(programFiles, startApi)
  // As long as a round: the JIT keeps optimizing well after the first requests.
  yield* step("warm-up (not counted), one round of each kind")
  for (const api of apis) yield* Effect.forEach(scenarios, api.drive, { discard: true })

  const figures = new Map<string, Array<RoundFigure>>()
  for (let pass = 1; pass <= s.rounds; pass++) {
    for (const scenario of scenarios) {
      yield* step(`round ${pass}: ${scenario}`)
      for (const [index, api] of apis.entries()) {
        const key = `${index}:${scenario}`
        figures.set(key, [...(figures.get(key) ?? []), yield* api.measure(scenario)])
      }
    }
  }

  const label: Record<Scenario, string> = {
    single: "single creates: API CPU ms per job",
    batch: `batches of ${s.batchSize}: API CPU ms per job`,
    read: "status reads: API CPU ms per read"
  }
  const lines = scenarios.flatMap((scenario) => [
    `${label[scenario]}:`,
    ...apis.flatMap((api, index) => {
      const runs = figures.get(`${index}:${scenario}`) ?? []
      return [
        `  ${api.file}: median ${round(median(runs.map((run) => run.cpuMsPerJob)), 3)} (rounds ${
          runs.map((run) => run.cpuMsPerJob).join(", ")
        }; per second ${runs.map((run) => run.perSecond).join(", ")})`,
        ...(s.cpuProfileDirectory === ""
          ? []
          : [`    profile windows (µs): ${runs.map((run) => `${run.window[0]}-${run.window[1]}`).join(" ")}`])
      ]
    }),
    ...apis.slice(1).map((api, offset) => {
      const first = figures.get(`0:${scenario}`) ?? []
      const other = figures.get(`${offset + 1}:${scenario}`) ?? []
      const ratios = other.map((run, i) => run.cpuMsPerJob / (first[i]?.cpuMsPerJob ?? Number.NaN))
      return `  ${api.file} / ${apis[0]?.file}: median of the per-round ratios ${round(median(ratios), 3)} (${
        ratios.map((ratio) => round(ratio, 3)).join(", ")
      })`
    })
  ])
  yield* Effect.sync(() => process.stdout.write(lines.join("\n") + "\n"))
  if (s.cpuProfileDirectory !== "") {
    // A profile is written on a clean exit only.
    for (const { api } of apis) {
      yield* api.signal("SIGTERM")
      yield* Effect.ignore(api.awaitExit(Duration.seconds(30)))
    }
    yield* step(`CPU profiles written to ${s.cpuProfileDirectory}`)
  }
}).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer))

NodeRuntime.runMain(program)
