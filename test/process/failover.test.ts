import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Schema } from "effect"
import { parsePrometheusText, sampleValue } from "../support/prometheusParser.js"
import { answerForPrompt, startSwitchableProvider, type SwitchableProvider } from "../support/switchableProvider.js"
import {
  createJob,
  decodeBody,
  dispatcherStarted,
  engineEnv,
  engineStorage,
  flashcardRequest,
  httpRequest,
  pollJob,
  startProgram,
  tokenFor,
  workerStarted
} from "./support/engine.js"

/**
 * Issue 34's acceptance: API + dispatcher + 2 workers on MySQL + Redis, two providers with keys
 * of their own and one route `primary → backup`. Healthy, the primary serves every call; while
 * it answers 500 to everything, jobs go on succeeding on the backup and the breaker keeps the
 * primary's calls to a handful; recovered, the primary takes the jobs again.
 */

const PRIMARY_KEY = "sk-primary-process-key-000000000001"
const BACKUP_KEY = "sk-backup-process-key-0000000000002"
// Short cooldowns so a probe comes within seconds; the defaults are 10 s doubling to 30 s.
const breaker = { AI_BREAKER_FAILURES: "3", AI_BREAKER_OPEN_MS: "5000", AI_BREAKER_MAX_OPEN_MS: "10000" }

const Stats = Schema.Struct({
  providers: Schema.Array(Schema.Struct({ provider: Schema.String, model: Schema.String, breaker: Schema.String }))
})

const callsWhile = (provider: SwitchableProvider, down: boolean) =>
  Effect.map(provider.calls, (calls) => calls.filter((call) => call.down === down).length)

describe("issue 34: a provider outage across processes", () => {
  it.live(
    "primary → backup: every job succeeds through the outage, the dead primary gets a handful of calls, and is used again once back",
    () =>
      Effect.gen(function*() {
        const primary = yield* startSwitchableProvider({
          name: "primary",
          apiKey: PRIMARY_KEY,
          latencyMs: 200,
          content: answerForPrompt
        })
        const backup = yield* startSwitchableProvider({
          name: "backup",
          apiKey: BACKUP_KEY,
          latencyMs: 200,
          content: answerForPrompt
        })
        const storage = yield* engineStorage("failover")
        const env = engineEnv(storage, {
          AI_GATEWAY: "openai",
          AI_PROVIDERS: JSON.stringify({
            primary: { baseUrl: primary.baseUrl, apiKeyEnv: "PRIMARY_KEY" },
            backup: { baseUrl: backup.baseUrl, apiKeyEnv: "BACKUP_KEY" }
          }),
          PRIMARY_KEY,
          BACKUP_KEY,
          AI_PROVIDER: "primary",
          AI_MODEL_ROUTES: JSON.stringify({
            "*:platform_key": { fallbacks: [{ provider: "backup", model: "backup-model" }] }
          }),
          MAX_ACTIVE_JOBS_PER_USER: "100",
          ...breaker
        })
        const [api, worker1, worker2] = yield* Effect.all(
          [
            startProgram("api", "api", env),
            startProgram("worker", "worker 1", { ...env, WORKER_ID: "failover-worker-1" }, { ready: workerStarted }),
            startProgram("worker", "worker 2", { ...env, WORKER_ID: "failover-worker-2" }, { ready: workerStarted }),
            startProgram("dispatcher", "dispatcher", env, { ready: dispatcherStarted })
          ],
          { concurrency: "unbounded" }
        )
        const token = yield* tokenFor(storage, "failover-user")
        const admin = yield* tokenFor(storage, "failover-ops", "SUPER_ADMIN")
        const runJobs = (count: number, everyMs: number, offset: number) =>
          Effect.forEach(
            Array.from({ length: count }, (_, i) => i),
            (i) =>
              Effect.gen(function*() {
                yield* Effect.sleep(Duration.millis(i * everyMs))
                const job = yield* createJob(api.baseUrl, token, "flashcard-generations", flashcardRequest(offset + i))
                return yield* pollJob(api.baseUrl, token, job.jobId, { timeout: Duration.seconds(60) })
              }),
            { concurrency: "unbounded" }
          )

        // Healthy: the primary serves every call.
        const healthy = yield* runJobs(4, 100, 0)
        expect(healthy.map((job) => job.lifecycleStatus)).toStrictEqual(Array(4).fill("succeeded"))
        expect([yield* callsWhile(primary, false), (yield* backup.calls).length]).toStrictEqual([4, 0])

        // The primary answers 500 to everything while 40 jobs arrive over 20 s.
        yield* primary.setDown(true)
        const outage = yield* Effect.fork(runJobs(40, 500, 100))
        // While it is down, operators see its breaker open: the console's stats and /metrics.
        yield* Effect.gen(function*() {
          while (true) {
            const stats = yield* Effect.flatMap(
              httpRequest("GET", `${api.baseUrl}/admin-api/ai/stats`, { token: admin }),
              decodeBody(Stats)
            )
            if (stats.providers.some((row) => row.provider === "primary" && row.breaker !== "closed")) return
            yield* Effect.sleep(Duration.millis(200))
          }
        }).pipe(Effect.timeout(Duration.seconds(20)))
        const metrics = parsePrometheusText(
          (yield* httpRequest("GET", `${api.baseUrl}/metrics`, { token: admin })).text
        )
        expect(sampleValue(metrics, "ai_provider_circuit_state", { provider: "primary", model: "deepseek-chat" }))
          .toBeGreaterThan(0)
        expect(sampleValue(metrics, "ai_provider_circuit_state", { provider: "backup", model: "backup-model" })).toBe(0)
        const during = yield* Fiber.join(outage)
        expect(during.map((job) => job.lifecycleStatus)).toStrictEqual(Array(40).fill("succeeded"))
        const latencies = during
          .map((job) => Date.parse(job.finishedAt ?? job.createdAt) - Date.parse(job.createdAt))
          .sort((a, b) => a - b)
        // Most within a couple of seconds: the backup answers in 200 ms once the primary is skipped.
        expect(latencies[Math.floor(latencies.length / 2)]).toBeLessThan(2_500)
        const deadCalls = yield* callsWhile(primary, true)
        // Three failures open the breaker (both workers may have a call out as it opens); then one
        // probe per cooldown (5 s, then 10 s) over the 20 s: a handful, not one per job.
        expect(deadCalls).toBeGreaterThanOrEqual(3)
        expect(deadCalls).toBeLessThanOrEqual(8)
        expect((yield* backup.calls).length).toBeGreaterThanOrEqual(40)

        // The primary recovers: within a cooldown (10 s at most here; a minute in all) new jobs use it again.
        yield* primary.setDown(false)
        const backAt = yield* Effect.gen(function*() {
          for (let i = 0;; i++) {
            yield* runJobs(1, 0, 200 + i)
            const answered = yield* callsWhile(primary, false)
            if (answered > 4) return i
            yield* Effect.sleep(Duration.seconds(1))
          }
        }).pipe(Effect.timeout(Duration.seconds(60)))
        expect(backAt).toBeLessThan(60)
        const backupBefore = (yield* backup.calls).length
        const after = yield* runJobs(3, 100, 300)
        expect(after.map((job) => job.lifecycleStatus)).toStrictEqual(Array(3).fill("succeeded"))
        expect((yield* backup.calls).length).toBe(backupBefore)

        // Neither provider ever saw the other's key (each answers 401 to any other).
        expect(new Set((yield* primary.calls).map((call) => call.authorization))).toStrictEqual(
          new Set([`Bearer ${PRIMARY_KEY}`])
        )
        expect(new Set((yield* backup.calls).map((call) => call.authorization))).toStrictEqual(
          new Set([`Bearer ${BACKUP_KEY}`])
        )
        // One line per state change, from the process that made it.
        const logs = worker1.output() + worker2.output()
        expect(logs).toContain("circuit breaker opened")
        expect(logs).toContain("circuit breaker closed")
        for (const key of [PRIMARY_KEY, BACKUP_KEY]) expect(logs + api.output()).not.toContain(key)
      }).pipe(Effect.scoped),
    { timeout: 180_000 }
  )
})
