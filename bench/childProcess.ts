import { Deferred, Effect, Queue, Schema } from "effect"
import { type ChildProcess, fork, type Serializable } from "node:child_process"
import { fileURLToPath } from "node:url"

/**
 * A bench child process (a TypeScript entry run through tsx) as a scoped resource, talking
 * over Node's IPC channel: messages from the child are decoded with `message` and land in a
 * queue; closing the scope asks the child to stop, then kills it if it does not exit in time.
 */
const cpuProfileDirectory = process.env["BENCH_CPU_PROF"] || undefined

export const benchChild = <A, I>(options: {
  readonly entry: string
  readonly args: ReadonlyArray<string>
  readonly message: Schema.Schema<A, I>
  readonly exposeGc?: boolean
}) =>
  Effect.gen(function*() {
    const inbox = yield* Queue.unbounded<A>()
    const exited = yield* Deferred.make<number | null>()
    const decode = Schema.decodeUnknownOption(options.message)
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const process: ChildProcess = fork(fileURLToPath(new URL(options.entry, import.meta.url)), [...options.args], {
          execArgv: [
            ...(options.exposeGc === true ? ["--expose-gc"] : []),
            // BENCH_CPU_PROF=/some/dir: each bench child writes a V8 CPU profile there when it stops.
            ...(cpuProfileDirectory === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${cpuProfileDirectory}`]),
            "--import",
            "tsx"
          ],
          stdio: ["ignore", "inherit", "inherit", "ipc"]
        })
        process.on("message", (raw) => {
          const decoded = decode(raw)
          if (decoded._tag === "Some") Queue.unsafeOffer(inbox, decoded.value)
        })
        process.on("exit", (code) => Deferred.unsafeDone(exited, Effect.succeed(code)))
        return process
      }),
      (process) =>
        Effect.gen(function*() {
          if (process.connected) process.send({ type: "stop" })
          const code = yield* Deferred.await(exited).pipe(Effect.timeoutOption("10 seconds"))
          if (code._tag === "None") process.kill("SIGKILL")
        })
    )
    /** The next message the child sends that satisfies `accept`; other messages are dropped. */
    const next = <B extends A>(accept: (message: A) => message is B, timeoutSeconds: number) =>
      Effect.gen(function*() {
        while (true) {
          const message = yield* Queue.take(inbox)
          if (accept(message)) return message
        }
      }).pipe(
        Effect.raceFirst(
          Effect.flatMap(
            Deferred.await(exited),
            (code) => Effect.dieMessage(`${options.entry} exited early (code ${code})`)
          )
        ),
        Effect.timeoutFail({
          duration: `${timeoutSeconds} seconds`,
          onTimeout: () => new Error(`${options.entry}: no answer within ${timeoutSeconds} s`)
        }),
        Effect.orDie
      )
    const send = (message: Serializable) => Effect.sync(() => void child.send(message))
    return { next, send, pid: child.pid ?? 0 }
  })

/** In a child: messages from the parent, decoded, as a queue (filled for the scope's lifetime). */
export const parentMessages = <A, I>(message: Schema.Schema<A, I>) =>
  Effect.gen(function*() {
    const inbox = yield* Queue.unbounded<A>()
    const decode = Schema.decodeUnknownOption(message)
    const listener = (raw: unknown) => {
      const decoded = decode(raw)
      if (decoded._tag === "Some") Queue.unsafeOffer(inbox, decoded.value)
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => process.on("message", listener)),
      () => Effect.sync(() => process.off("message", listener))
    )
    return inbox
  })

/** In a child: sends one message to the parent. */
export const toParent = (message: Serializable) =>
  Effect.async<void>((resume) => {
    if (process.send === undefined) return resume(Effect.void)
    process.send(message, undefined, undefined, () => resume(Effect.void))
  })
