/**
 * `npm run bench:startup`: how long each built program (`dist/*.js`, what the start scripts run)
 * takes from spawn to ready, and the CPU time it spent getting there (close to the wall time an
 * idle machine would show). Ready is `/readyz` answering 200 for the programs that serve HTTP,
 * and the program's ready log line for the others. The embedded all-in-one runs with no
 * configuration; api, worker and dispatcher run on a scratch database and a Redis key prefix.
 * `--runs N` (default 3) starts each program N times; the median is printed.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Duration, Effect, Option, Schedule } from "effect"
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { createServer } from "node:net"
import { fileURLToPath } from "node:url"
import { redisNamespace, scratchDatabase } from "./infra.js"
import { loadBenchSettings } from "./settings.js"
import { percentile } from "./stats.js"

const repositoryRoot = fileURLToPath(new URL("..", import.meta.url))

/** Clock ticks (USER_HZ, 100 on Linux) of user + system time of `pid`, from /proc; none elsewhere. */
const cpuMillisOf = (pid: number): Option.Option<number> => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? []
    return Option.some((Number(fields[11]) + Number(fields[12])) * 10)
  } catch {
    return Option.none()
  }
}

const freePort = Effect.async<number>((resume) => {
  const server = createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

interface Readiness {
  readonly program: string
  /** `readyz` polls the HTTP endpoint; a RegExp waits for a line of output. */
  readonly ready: "readyz" | RegExp
  readonly env: Readonly<Record<string, string>>
}

/** One start: spawn, wait until ready, read its CPU time, stop it. */
const startOnce = (readiness: Readiness) =>
  Effect.gen(function*() {
    const port = yield* freePort
    const started = performance.now()
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, [`dist/${readiness.program}.js`], {
          cwd: repositoryRoot,
          env: { PATH: process.env["PATH"] ?? "", ...readiness.env, PORT: String(port) },
          stdio: ["ignore", "pipe", "pipe"]
        })
      ),
      (child) => Effect.sync(() => child.kill("SIGKILL"))
    )
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
    const ready = readiness.ready
    const check = ready === "readyz"
      ? Effect.tryPromise(() => fetch(`http://127.0.0.1:${port}/readyz`)).pipe(
        Effect.map((response) => response.status === 200),
        Effect.orElseSucceed(() => false)
      )
      : Effect.sync(() => ready.test(output))
    yield* check.pipe(
      Effect.repeat({ schedule: Schedule.spaced(Duration.millis(10)), until: (isReady) => isReady }),
      Effect.timeoutFail({
        duration: Duration.seconds(60),
        onTimeout: () => new Error(`${readiness.program} not ready:\n${output}`)
      })
    )
    const wallMs = performance.now() - started
    const cpuMs = Option.getOrElse(cpuMillisOf(child.pid ?? 0), () => Number.NaN)
    return { wallMs, cpuMs }
  }).pipe(Effect.scoped)

const runsOption = () => {
  const index = process.argv.indexOf("--runs")
  const runs = index >= 0 ? Number(process.argv[index + 1]) : 3
  return Number.isInteger(runs) && runs > 0 ? runs : 3
}

const program = Effect.gen(function*() {
  const settings = yield* loadBenchSettings
  const runs = runsOption()
  const { databaseUrl } = yield* scratchDatabase(settings.serverUrl)
  const redisPrefix = yield* redisNamespace(settings.redisUrl)
  const storage = {
    DATABASE_URL: databaseUrl,
    REDIS_URL: settings.redisUrl,
    REDIS_KEY_PREFIX: redisPrefix,
    AUTH_JWT_SECRET: "startup-bench-secret-startup-bench-secret-0123456789",
    AI_GATEWAY: "synthetic",
    AI_API_KEY: "synthetic-provider-needs-no-key",
    MIGRATE_ON_START: "false"
  }
  const cases: ReadonlyArray<Readiness & { readonly label: string }> = [
    { label: "all-in-one (embedded)", program: "all-in-one", ready: "readyz", env: {} },
    { label: "all-in-one (MySQL + Redis)", program: "all-in-one", ready: "readyz", env: storage },
    { label: "api (MySQL + Redis)", program: "api", ready: "readyz", env: storage },
    { label: "worker (MySQL + Redis)", program: "worker", ready: /worker started/, env: storage },
    { label: "dispatcher (MySQL + Redis)", program: "dispatcher", ready: /Outbox dispatcher started/, env: storage }
  ]
  yield* Console.log(
    `spawn → ready, median of ${runs} (dist/ bundles; load average ${
      readFileSync("/proc/loadavg", "utf8").split(" ")[0]
    })`
  )
  for (const entry of cases) {
    const samples = yield* Effect.forEach(Array.from({ length: runs }), () => startOnce(entry))
    const wall = Math.round(percentile(samples.map((sample) => sample.wallMs), 50))
    const cpu = Math.round(percentile(samples.map((sample) => sample.cpuMs), 50))
    yield* Console.log(
      `  ${entry.label.padEnd(28)} ${String(wall).padStart(6)} ms wall  ${String(cpu).padStart(6)} ms CPU`
    )
  }
}).pipe(Effect.scoped)

NodeRuntime.runMain(program)
