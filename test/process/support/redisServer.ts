import { Duration, Effect, type Scope } from "effect"
import { Redis } from "ioredis"
import { engineAclRule } from "../../../src/layers/redis/aclRule.js"
import { childEnv, type ChildProgram, freePort, type ProcessTestError, spawnProgram } from "./childProcess.js"

/**
 * A private `redis-server` for a test that must stop Redis or change its users: the shared
 * Redis on 6379 serves every other test file and is never touched. Nothing is persisted; the
 * scope kills it.
 */
export interface PrivateRedis {
  readonly port: number
  readonly url: string
  readonly server: ChildProgram
}

export const startRedisServer = (
  options: { readonly port?: number; readonly name?: string } = {}
): Effect.Effect<PrivateRedis, ProcessTestError, Scope.Scope> =>
  Effect.gen(function*() {
    const port = options.port ?? (yield* freePort)
    const server = yield* spawnProgram(
      options.name ?? `redis-server:${port}`,
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"],
      childEnv({})
    )
    yield* server.waitForOutput(/Ready to accept connections/, Duration.seconds(10))
    return { port, url: `redis://127.0.0.1:${port}`, server }
  })

/** Kills the server at once (SIGKILL: no goodbye to its clients) and waits for it to go. */
export const killRedisServer = (redis: PrivateRedis) =>
  Effect.zipRight(redis.server.signal("SIGKILL"), redis.server.awaitExit(Duration.seconds(10)))

/** An engine user on a private Redis, limited to `engineAclRule(prefix)`, and what the server refused it. */
export interface RestrictedRedisUser {
  /** `REDIS_URL` for the engine: the restricted user's credentials on the private server. */
  readonly url: string
  /** The server's ACL LOG since the user was made: every command, key or channel it refused. */
  readonly refusals: Effect.Effect<ReadonlyArray<unknown>>
}

/**
 * Creates the engine's restricted user on `redis` (the rule operators are told to apply, under
 * `prefix`) and clears the ACL LOG, through an admin connection closed with the scope.
 */
export const restrictedEngineUser = (
  redis: PrivateRedis,
  prefix: string
): Effect.Effect<RestrictedRedisUser, never, Scope.Scope> =>
  Effect.gen(function*() {
    const user = "aije-engine"
    const password = "engine-password-0123456789"
    const admin = yield* Effect.acquireRelease(
      Effect.sync(() => new Redis(redis.url, { maxRetriesPerRequest: 1 })),
      (client) => Effect.promise(() => client.quit()).pipe(Effect.ignore)
    )
    const call = (command: string, ...args: ReadonlyArray<string>) =>
      Effect.promise((): Promise<unknown> => admin.call(command, ...args))
    yield* call("ACL", "SETUSER", user, "on", `>${password}`, ...engineAclRule(prefix).split(" "))
    yield* call("ACL", "LOG", "RESET")
    return {
      url: `redis://${user}:${password}@127.0.0.1:${redis.port}`,
      refusals: Effect.map(call("ACL", "LOG"), (log) => (Array.isArray(log) ? log : [log]))
    }
  })
