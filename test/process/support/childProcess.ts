import { Data, Deferred, Duration, Effect, Option, type Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { createServer } from "node:net"

/**
 * Real child processes for the process tests: each runs in its own process group (so `npm start`,
 * which is npm → node, can be ended as a whole), its output is kept for assertions
 * and for failure messages, and the scope that spawned it kills what is still running.
 */

/** The repository root: every program is started from there, as an operator would. */
export const repoRoot = new URL("../../../", import.meta.url).pathname

export interface ProcessExit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export class ProcessTestError extends Data.TaggedError("ProcessTestError")<{ readonly message: string }> {}

export interface ChildProgram {
  readonly name: string
  readonly pid: number
  /** Everything it wrote so far (stdout and stderr interleaved as they arrived). */
  readonly output: () => string
  /** The last `lines` lines of output, for failure messages. */
  readonly tail: (lines?: number) => string
  /** Waits until the output matches `pattern` (checked on what is there already, too). */
  readonly waitForOutput: (
    pattern: RegExp,
    timeout: Duration.DurationInput
  ) => Effect.Effect<RegExpMatchArray, ProcessTestError>
  /** Sends a signal to the program's own process (not its group). */
  readonly signal: (signal: NodeJS.Signals) => Effect.Effect<void>
  /** Waits for the exit; fails when it takes longer than `timeout`. */
  readonly awaitExit: (timeout: Duration.DurationInput) => Effect.Effect<ProcessExit, ProcessTestError>
  /** The exit, if it happened. */
  readonly exitNow: Effect.Effect<Option.Option<ProcessExit>>
}

/** Variables the children inherit from the test runner; everything else is given explicitly. */
const inheritedVariables = ["PATH", "HOME", "USER", "TMPDIR", "LANG", "TERM"] as const

export const childEnv = (variables: Readonly<Record<string, string>>): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const name of inheritedVariables) {
    const value = process.env[name]
    if (value !== undefined) env[name] = value
  }
  return { ...env, ...variables }
}

/**
 * How a main program is started: `node dist/{entry}.js`, the bundle production runs (built once
 * by the suite's global setup), so it starts in about a second and gets signals directly.
 */
export const nodeProgram = (entry: "all-in-one" | "api" | "worker" | "dispatcher" | "migrate") =>
  ["node", [`dist/${entry}.js`]] as const

const killGroup = (child: ChildProcess, signal: NodeJS.Signals) => {
  if (child.pid === undefined) return
  try {
    process.kill(-child.pid, signal)
  } catch {
    // The group is gone already.
  }
}

/**
 * Spawns `command args` in the repository with exactly `env`. The scope's finalizer kills the
 * whole process group (SIGKILL) if the program is still running, and waits for it to go.
 */
export const spawnProgram = (
  name: string,
  command: string,
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv
): Effect.Effect<ChildProgram, ProcessTestError, Scope.Scope> =>
  Effect.gen(function*() {
    const exited = yield* Deferred.make<ProcessExit>()
    const child = yield* Effect.acquireRelease(
      Effect.try({
        try: () => spawn(command, [...args], { cwd: repoRoot, env, detached: true, stdio: ["ignore", "pipe", "pipe"] }),
        catch: (error) => new ProcessTestError({ message: `${name}: spawn failed: ${String(error)}` })
      }),
      (child) =>
        Effect.gen(function*() {
          // The whole group: grandchildren (npm start's node) may outlive the leader.
          killGroup(child, "SIGKILL")
          yield* Deferred.await(exited).pipe(Effect.timeoutOption(Duration.seconds(10)))
        })
    )
    const pid = child.pid
    if (pid === undefined) return yield* new ProcessTestError({ message: `${name}: no pid (spawn failed)` })

    let output = ""
    const listeners = new Set<() => void>()
    const echo = process.env["PROCESS_TEST_ECHO"] !== undefined
    const append = (chunk: Buffer) => {
      const text = chunk.toString("utf8")
      output += text
      // PROCESS_TEST_ECHO=1 shows every child's output live, each line prefixed by its name.
      if (echo) {
        process.stderr.write(
          text.split("\n").filter((line) => line.length > 0).map((line) => `[${name}] ${line}\n`).join("")
        )
      }
      for (const listener of listeners) listener()
    }
    child.stdout?.on("data", append)
    child.stderr?.on("data", append)
    child.on("exit", (code, signal) => {
      Deferred.unsafeDone(exited, Effect.succeed({ code, signal }))
    })
    child.on("error", () => {
      Deferred.unsafeDone(exited, Effect.succeed({ code: null, signal: null }))
    })

    const tail = (lines = 40) => output.split("\n").slice(-lines).join("\n")

    const waitForOutput = (pattern: RegExp, timeout: Duration.DurationInput) =>
      Effect.async<RegExpMatchArray>((resume) => {
        const check = () => {
          const match = output.match(pattern)
          if (match !== null) {
            listeners.delete(check)
            resume(Effect.succeed(match))
          }
        }
        listeners.add(check)
        check()
        return Effect.sync(() => listeners.delete(check))
      }).pipe(
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () =>
            new ProcessTestError({
              message: `${name}: no output matching ${pattern} within ${Duration.format(timeout)}\n${tail()}`
            })
        })
      )

    return {
      name,
      pid,
      output: () => output,
      tail,
      waitForOutput,
      signal: (signal) =>
        Effect.sync(() => {
          try {
            process.kill(pid, signal)
          } catch {
            // Already gone.
          }
        }),
      awaitExit: (timeout) =>
        Deferred.await(exited).pipe(
          Effect.timeoutFail({
            duration: timeout,
            onTimeout: () =>
              new ProcessTestError({ message: `${name}: still running after ${Duration.format(timeout)}\n${tail()}` })
          })
        ),
      exitNow: Deferred.poll(exited).pipe(
        Effect.flatMap(Option.match({ onNone: () => Effect.succeedNone, onSome: (done) => Effect.asSome(done) }))
      )
    } satisfies ChildProgram
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
