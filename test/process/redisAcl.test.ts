import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Schema } from "effect"
import { Redis } from "ioredis"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { WorkersResponse } from "../../src/http/ApiSchemas.js"
import { bullMqScriptCommands, engineAclRule } from "../../src/layers/redis/aclRule.js"
import { childEnv, repoRoot, spawnProgram } from "./support/childProcess.js"
import {
  createJob,
  decodeBody,
  engineEnv,
  engineStorage,
  executeSettleMs,
  feynmanRequest,
  flashcardRequest,
  getArtifacts,
  httpRequest,
  inExecute,
  pollJob,
  startProgram,
  tokenFor
} from "./support/engine.js"
import { startRedisServer } from "./support/redisServer.js"

const engineUser = "aije-engine"
const enginePassword = "engine-password-0123456789"

/** An admin (`default`) connection to the private server, closed with the scope. */
const adminClient = (url: string) =>
  Effect.acquireRelease(
    Effect.sync(() => new Redis(url, { maxRetriesPerRequest: 1 })),
    (client) => Effect.promise(() => client.quit()).pipe(Effect.ignore)
  )

const call = (client: Redis, command: string, ...args: ReadonlyArray<string>) =>
  Effect.promise((): Promise<unknown> => client.call(command, ...args))

/** One ACL LOG entry: what was refused, to whom. */
const AclLogEntry = Schema.Array(Schema.Unknown)

/** Every command name BullMQ's installed Lua scripts pass to `rcall` / `redis.call`, literal or via a local. */
const commandsInBullMqScripts = () => {
  const directory = join(repoRoot, "node_modules", "bullmq", "dist", "esm", "scripts")
  const source = readdirSync(directory)
    .filter((file) => file.endsWith(".js"))
    .map((file) => readFileSync(join(directory, file), "utf8"))
    .join("\n")
  const literal = Array.from(
    source.matchAll(/(?:rcall|redis\.p?call)\(\s*["']([A-Za-z]+)["']/g),
    (match) => match[1] ?? ""
  )
  // `local pushCmd = lifo and 'RPUSH' or 'LPUSH'`, `countCommand = "HLEN"`, `command == "HSCAN"`, ...
  const viaLocals = Array.from(
    source.matchAll(/(?:pushCmd|countCommand|scanCommand|command)\s*==?\s*([^\n]+)/g),
    (match) => Array.from((match[1] ?? "").matchAll(/["']([A-Z]+)["']/g), (name) => name[1] ?? "")
  ).flat()
  return new Set([...literal, ...viaLocals].map((name) => name.toLowerCase()).filter((name) => name.length > 0))
}

describe("issue 7 item 5: the engine under a restricted Redis ACL user", () => {
  it("the rule grants every command BullMQ's installed Lua scripts call (a BullMQ upgrade that needs more fails here)", () => {
    const granted = new Set(
      engineAclRule("aije").split(" ").filter((word) => word.startsWith("+")).map((word) => word.slice(1))
    )
    expect(bullMqScriptCommands.every((name) => granted.has(name))).toBe(true)
    const missing = Array.from(commandsInBullMqScripts()).filter((name) => !granted.has(name)).sort()
    expect(missing).toEqual([])
  })

  it.live(
    "all-in-one on MySQL + a Redis user limited to engineAclRule(prefix) runs, cancels and shuts down; nothing is refused",
    () =>
      Effect.gen(function*() {
        const redis = yield* startRedisServer()
        const admin = yield* adminClient(redis.url)
        const restrictedUrl = `redis://${engineUser}:${enginePassword}@127.0.0.1:${redis.port}`
        const storage = yield* engineStorage("acl", { redisUrl: restrictedUrl, migrate: false })
        const rule = engineAclRule(storage.redisPrefix)
        expect(yield* call(admin, "ACL", "SETUSER", engineUser, "on", `>${enginePassword}`, ...rule.split(" "))).toBe(
          "OK"
        )
        yield* call(admin, "ACL", "LOG", "RESET")

        // ACL_TEST_MONITOR=1 prints every command the engine sent (to regenerate the rule after a BullMQ upgrade).
        const monitor = process.env["ACL_TEST_MONITOR"] === undefined
          ? undefined
          : yield* spawnProgram("monitor", "redis-cli", ["-p", String(redis.port), "monitor"], childEnv({}))

        const engine = yield* startProgram(
          "all-in-one",
          "all-in-one (restricted Redis user)",
          engineEnv(storage, { MIGRATE_ON_START: "true", SYNTHETIC_LATENCY_MS: "1500" })
        )
        const token = yield* tokenFor(storage, "acl-user")

        // A job of each queue runs to the end: BullMQ's scripts, the outbox wake-up, heartbeats.
        const flashcards = yield* createJob(engine.baseUrl, token, "flashcard-generations", flashcardRequest(1))
        const evaluation = yield* createJob(engine.baseUrl, token, "feynman-evaluations", feynmanRequest(1))
        // A cancel while running: the SET + PUBLISH on job:cancel and the PSUBSCRIBE that hears it.
        const doomed = yield* createJob(engine.baseUrl, token, "feynman-evaluations", feynmanRequest(2))
        yield* pollJob(engine.baseUrl, token, doomed.jobId, {
          until: inExecute,
          timeout: Duration.seconds(20)
        })
        yield* Effect.sleep(Duration.millis(executeSettleMs))
        const cancel = yield* httpRequest("POST", `${engine.baseUrl}/api/ai/jobs/${doomed.jobId}/cancel`, { token })
        expect(cancel.status).toBe(200)

        const [flashcardsDone, evaluationDone, doomedDone] = yield* Effect.forEach(
          [flashcards, evaluation, doomed],
          (job) => pollJob(engine.baseUrl, token, job.jobId, { timeout: Duration.seconds(30) }),
          { concurrency: "unbounded" }
        )
        expect(flashcardsDone.lifecycleStatus).toBe("succeeded")
        expect(evaluationDone.lifecycleStatus).toBe("succeeded")
        expect(doomedDone.lifecycleStatus).toBe("cancelled")
        const cards = yield* getArtifacts(engine.baseUrl, token, flashcards.jobId)
        expect(cards.artifacts.length).toBeGreaterThan(0)
        expect(cards.records.length).toBe(cards.artifacts.length)

        // The worker directory: SET EX by the worker, SCAN + MGET by the admin route.
        const adminToken = yield* tokenFor(storage, "acl-admin", "SUPER_ADMIN")
        const workers = yield* httpRequest("GET", `${engine.baseUrl}/admin-api/ai/workers`, { token: adminToken }).pipe(
          Effect.flatMap(decodeBody(WorkersResponse))
        )
        expect(workers.workers.length).toBe(1)

        // Every connection of the engine is the restricted user.
        const clients = String(yield* call(admin, "CLIENT", "LIST")).split("\n").filter((line) =>
          line.includes("user=")
        )
        const engineClients = clients.filter((line) => line.includes(`user=${engineUser}`))
        expect(engineClients.length).toBeGreaterThan(3)
        expect(clients.length - engineClients.length).toBe(monitor === undefined ? 1 : 2) // the admin (and monitor) connections

        // Graceful shutdown under the same user: QUIT, unsubscribes, the worker's key removed.
        yield* engine.signal("SIGTERM")
        expect(yield* engine.awaitExit(Duration.seconds(15))).toEqual({ code: 0, signal: null })

        const refused = yield* call(admin, "ACL", "LOG").pipe(Effect.flatMap(Schema.decodeUnknown(AclLogEntry)))
        expect(refused, JSON.stringify(refused)).toEqual([])
        expect(engine.output()).not.toMatch(/NOPERM|no permissions/i)

        // What the rule keeps from the engine user: other prefixes' key names and other databases.
        yield* call(admin, "SET", "other-tenant:secret", "x")
        const engineClient = yield* adminClient(restrictedUrl)
        const refusal = (command: string, ...args: ReadonlyArray<string>) =>
          Effect.tryPromise(() => engineClient.call(command, ...args)).pipe(
            Effect.flip,
            Effect.map((error) => String(error.cause))
          )
        expect(yield* refusal("SCAN", "0", "MATCH", "*")).toMatch(/NOPERM/)
        expect(yield* refusal("KEYS", "*")).toMatch(/NOPERM/)
        expect(yield* refusal("SELECT", "1")).toMatch(/NOPERM/)
        expect(yield* refusal("GET", "other-tenant:secret")).toMatch(/NOPERM/)
        expect(yield* call(engineClient, "PING")).toBe("PONG")

        if (monitor !== undefined) {
          const commands = new Set(
            Array.from(monitor.output().matchAll(/\] "([A-Za-z]+)"(?: "([A-Za-z]+)")?/g), (match) =>
              match[1] === undefined
                ? ""
                : match[1].toLowerCase() === "client"
                ? `client|${(match[2] ?? "").toLowerCase()}`
                : match[1].toLowerCase())
          )
          console.log(`commands seen: ${Array.from(commands).sort().join(" ")}`)
        }
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
