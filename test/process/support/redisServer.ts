import { Duration, Effect, type Scope } from "effect"
import { type ChildProgram, childEnv, freePort, type ProcessTestError, spawnProgram } from "./childProcess.js"

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
  Effect.gen(function* () {
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
