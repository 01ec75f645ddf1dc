import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Console, Duration, Effect, Exit, Layer, Scope, TestClock } from "effect"
import { logBatchWindow, LoggingLive } from "../../../src/layers/logging.js"

/** A Console that keeps what `log` was given, one entry per call (one write of stdout). */
const recordingConsole = Effect.map(Effect.console, (current) => {
  const writes: Array<string> = []
  const console: Console.Console = {
    ...current,
    log: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void writes.push(args.map(String).join(" ")))
  }
  return { writes, console }
})

const withFormat = (format: string) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["LOG_FORMAT", format], ["LOG_LEVEL", "Info"]])))

/** Builds `LoggingLive` in `scope` and returns it, so a test logs through it and closes it when it likes. */
const loggingIn = (scope: Scope.Scope) => Layer.buildWithScope(LoggingLive, scope)

describe("production log lines are written in batches", () => {
  it.effect("LOG_FORMAT=json: the lines of one window go out in one write, whole and in order", () =>
    Effect.gen(function*() {
      const { console, writes } = yield* recordingConsole
      const scope = yield* Scope.make()
      const context = yield* loggingIn(scope).pipe(Effect.withConsole(console), withFormat("json"))
      yield* Effect.forEach(["first", "second", "third"], (message) => Effect.logInfo(message), { discard: true }).pipe(
        Effect.provide(context)
      )
      expect(writes).toEqual([])
      yield* TestClock.adjust(Duration.decode(logBatchWindow))
      expect(writes).toHaveLength(1)
      const lines = writes[0]!.split("\n").map((line) => JSON.parse(line) as { readonly message: unknown })
      expect(lines.map((line) => line.message)).toEqual(["first", "second", "third"])
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("lines still waiting are written when the logging layer closes (a process that stops loses none)", () =>
    Effect.gen(function*() {
      const { console, writes } = yield* recordingConsole
      const scope = yield* Scope.make()
      const context = yield* loggingIn(scope).pipe(Effect.withConsole(console), withFormat("logfmt"))
      yield* Effect.logInfo("last words").pipe(Effect.provide(context))
      expect(writes).toEqual([])
      yield* Scope.close(scope, Exit.void)
      expect(writes).toHaveLength(1)
      expect(writes[0]).toMatch(/level=INFO .*message="last words"/)
    }))
})
