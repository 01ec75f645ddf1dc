import { Data, Deferred, Duration, Effect, Option, type Scope } from "effect"
import { spawn } from "node:child_process"
import { createWriteStream } from "node:fs"
import { createServer } from "node:net"

/**
 * One child process of the chaos fleet. @effect/platform's Command waits for the exit whenever
 * it signals a process, which a SIGSTOP never brings, so the fleet spawns with node's
 * `child_process` here: signals are fire-and-forget, the exit is a Deferred, output goes to a
 * log file, and the scope kills the whole process group (SIGKILL reaches a stopped one too).
 */

export const repoRoot = new URL("../", import.meta.url).pathname

export class ChaosError extends Data.TaggedError("ChaosError")<{ readonly message: string }> {}

export interface ProcessExit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export interface Child {
  readonly name: string
  readonly pid: number
  /** Waits until the output matches `pattern`; fails on timeout or when the process exits first. */
  readonly waitForOutput: (pattern: RegExp, timeout: Duration.DurationInput) => Effect.Effect<void, ChaosError>
  /** Sends `signal` to the process group; never waits. */
  readonly signal: (signal: NodeJS.Signals) => Effect.Effect<void>
  readonly awaitExit: (timeout: Duration.DurationInput) => Effect.Effect<Option.Option<ProcessExit>>
  readonly exited: Effect.Effect<boolean>
}

/** Variables a child inherits from the chaos run; everything else is given explicitly. */
const inherited = ["PATH", "HOME", "USER", "TMPDIR", "LANG", "TERM"] as const

export const childEnv = (variables: Readonly<Record<string, string>>): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const name of inherited) {
    const value = process.env[name]
    if (value !== undefined) env[name] = value
  }
  return { ...env, ...variables }
}

const signalGroup = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pid, signal)
  } catch {
    // The group is gone already.
  }
}

/** Spawns `command args` from the repository root, appending its output to `logFile`. */
export const spawnChild = (
  name: string,
  command: string,
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv,
  logFile: string
): Effect.Effect<Child, ChaosError, Scope.Scope> =>
  Effect.gen(function*() {
    const exit = yield* Deferred.make<ProcessExit>()
    const log = createWriteStream(logFile, { flags: "a" })
    let recent = ""
    const listeners = new Set<() => void>()
    const child = yield* Effect.acquireRelease(
      Effect.try({
        try: () => spawn(command, [...args], { cwd: repoRoot, env, detached: true, stdio: ["ignore", "pipe", "pipe"] }),
        catch: (error) => new ChaosError({ message: `${name}: spawn failed: ${String(error)}` })
      }),
      (child) =>
        Effect.gen(function*() {
          if (child.pid !== undefined) signalGroup(child.pid, "SIGKILL")
          yield* Deferred.await(exit).pipe(Effect.timeoutOption(Duration.seconds(10)))
          log.end()
        })
    )
    const pid = child.pid
    if (pid === undefined) return yield* new ChaosError({ message: `${name}: no pid` })
    log.write(`--- ${name} (pid ${pid}) ---\n`)
    const append = (chunk: Buffer) => {
      log.write(chunk)
      // Only the recent output is kept in memory, enough to find a readiness line across chunks.
      recent = (recent + chunk.toString("utf8")).slice(-8_192)
      for (const listener of listeners) listener()
    }
    child.stdout?.on("data", append)
    child.stderr?.on("data", append)
    child.on("exit", (code, signal) => {
      Deferred.unsafeDone(exit, Effect.succeed({ code, signal }))
      for (const listener of listeners) listener()
    })
    child.on("error", () => Deferred.unsafeDone(exit, Effect.succeed({ code: null, signal: null })))

    const waitForOutput = (pattern: RegExp, timeout: Duration.DurationInput) =>
      Effect.async<void, ChaosError>((resume) => {
        const check = () => {
          if (pattern.test(recent)) {
            listeners.delete(check)
            resume(Effect.void)
          } else if (child.exitCode !== null || child.signalCode !== null) {
            listeners.delete(check)
            resume(Effect.fail(new ChaosError({ message: `${name} exited before it was ready; see ${logFile}` })))
          }
        }
        listeners.add(check)
        check()
        return Effect.sync(() => listeners.delete(check))
      }).pipe(
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () =>
            new ChaosError({ message: `${name}: not ready within ${Duration.format(timeout)}; see ${logFile}` })
        })
      )

    return {
      name,
      pid,
      waitForOutput,
      signal: (signal) => Effect.sync(() => signalGroup(pid, signal)),
      awaitExit: (timeout) => Deferred.await(exit).pipe(Effect.timeoutOption(timeout)),
      exited: Deferred.isDone(exit)
    } satisfies Child
  })

/** A TCP port nothing listens on right now (the OS picks it). */
export const freePort: Effect.Effect<number> = Effect.async<number>((resume) => {
  const server = createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})
