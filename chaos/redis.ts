import { Duration, Effect, Ref, type Scope } from "effect"
import { Redis } from "ioredis"
import { join } from "node:path"
import { ChaosError, type Child, childEnv, freePort, spawnChild } from "./process.js"

/**
 * The fleet's own `redis-server` on a free port, never the shared one: the run restarts it
 * (SHUTDOWN NOSAVE, then a new server on the same port, empty) and pauses its clients.
 * Nothing is persisted; the scope kills whichever server runs last.
 */
export interface ChaosRedis {
  readonly url: string
  /** SHUTDOWN NOSAVE, wait for the exit, start again on the same port. */
  readonly restart: Effect.Effect<void, ChaosError, Scope.Scope>
  /** CLIENT PAUSE `ms` ALL: every client's commands wait. */
  readonly pause: (ms: number) => Effect.Effect<void, ChaosError>
}

/** One command on a connection of its own, closed after it (the server may be going away). */
const adminCommand = (url: string, command: string, args: ReadonlyArray<string | number>) =>
  Effect.acquireUseRelease(
    Effect.sync(() =>
      new Redis(url, {
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        connectionName: "chaos-admin"
      })
    ),
    (client) =>
      Effect.tryPromise({
        try: async () => {
          await client.connect()
          return await client.call(command, ...args)
        },
        catch: (error) => new ChaosError({ message: `redis ${command}: ${String(error)}` })
      }),
    (client) => Effect.sync(() => client.disconnect())
  )

export const startChaosRedis = (logDir: string): Effect.Effect<ChaosRedis, ChaosError, Scope.Scope> =>
  Effect.gen(function*() {
    const port = yield* freePort
    const url = `redis://127.0.0.1:${port}`
    const start = Effect.gen(function*() {
      const server = yield* spawnChild(
        `redis-server:${port}`,
        "redis-server",
        ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"],
        childEnv({}),
        join(logDir, "redis.log")
      )
      yield* server.waitForOutput(/Ready to accept connections/, Duration.seconds(10))
      return server
    })
    const current = yield* Ref.make<Child>(yield* start)

    const restart = Effect.gen(function*() {
      const server = yield* Ref.get(current)
      // The server closes the connection as it goes: an error here is the expected goodbye.
      yield* adminCommand(url, "SHUTDOWN", ["NOSAVE"]).pipe(Effect.ignore)
      const exit = yield* server.awaitExit(Duration.seconds(5))
      if (exit._tag === "None") {
        yield* server.signal("SIGKILL")
        yield* server.awaitExit(Duration.seconds(5))
      }
      yield* Ref.set(current, yield* start)
    })

    return {
      url,
      restart,
      pause: (ms) => adminCommand(url, "CLIENT", ["PAUSE", ms, "ALL"]).pipe(Effect.asVoid)
    } satisfies ChaosRedis
  })
