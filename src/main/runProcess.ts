import { NodeRuntime } from "@effect/platform-node"
import { Cause, ConfigError, Console, Data, Effect, Layer, Option } from "effect"
import { StorageConfig } from "../config/EngineConfig.js"
import { TelemetrySettings } from "../config/TelemetrySettings.js"
import { LoggingLive } from "../layers/logging.js"
import { TracingLive } from "../layers/telemetry/Tracing.js"

export class StorageMissing extends Data.TaggedError("StorageMissing")<{
  readonly process: string
  readonly variables: ReadonlyArray<string>
}> {
  override get message() {
    return `${this.variables.join(" and ")} must be set: ${this.process} runs on MySQL and Redis`
  }
}

/** Fails with one readable line, before any connection is tried, when MySQL or Redis is not configured. */
export const requireStorage = (process: string) =>
  Layer.effectDiscard(
    Effect.gen(function*() {
      const storage = yield* StorageConfig
      const missing = [
        ...(Option.isNone(storage.databaseUrl) ? ["DATABASE_URL"] : []),
        ...(Option.isNone(storage.redisUrl) ? ["REDIS_URL"] : [])
      ]
      if (missing.length > 0) return yield* Effect.fail(new StorageMissing({ process, variables: missing }))
    })
  ).pipe(Layer.provide(StorageConfig.layer))

/** `SqlError`'s own message ("Failed to connect") hides the reason, which is in its cause. */
const failureMessage = (error: Error): string => {
  const inner: unknown = error.cause
  return inner instanceof Error && inner.message !== error.message
    ? `${error.message}: ${failureMessage(inner)}`
    : error.message
}

/**
 * One line for an expected failure (a bad variable, an unreachable database); the full cause
 * only for a defect, where the trace helps. `otherwise` words a failure that is no `Error`.
 */
export const reportFailure =
  (name: string, otherwise: (error: unknown) => string = String) => <E>(cause: Cause.Cause<E>) =>
    Cause.isInterruptedOnly(cause)
      ? Effect.void
      : Console.error(
        Option.match(Cause.failureOption(cause), {
          onNone: () => `${name}: ${Cause.pretty(cause)}`,
          onSome: (error) =>
            ConfigError.isConfigError(error)
              ? `${name}: ${String(error)}`
              : error instanceof Error
              ? `${name}: ${failureMessage(error)}`
              : `${name}: ${otherwise(error)}`
        })
      )

/** Runs a one-shot program (migrate, a check): its failure is one line and exit code 1. */
export const runOnce = <A, E>(
  name: string,
  program: Effect.Effect<A, E>,
  options: { readonly otherwise?: (error: unknown) => string } = {}
) =>
  program.pipe(
    Effect.provide(LoggingLive),
    Effect.tapErrorCause(reportFailure(name, options.otherwise)),
    (main) => NodeRuntime.runMain(main, { disableErrorReporting: true, disablePrettyLogger: true })
  )

/** `service.name` unless `OTEL_SERVICE_NAME` says otherwise: `ai-job-engine-worker`, ... or `ai-job-engine` (all-in-one). */
const serviceNameOf = (name: string) => (name === "ai-job-engine" ? name : `ai-job-engine-${name}`)

/**
 * Runs a process made of layers until SIGTERM or SIGINT, which interrupt it: every layer's
 * finalizers run (workers hand their jobs back, servers drain, pools close) and it exits 0.
 * A start-up failure prints one line naming the problem and exits 1.
 */
export const runProcess = <E>(name: string, process: Layer.Layer<never, E>) =>
  Layer.launch(process).pipe(
    // Telemetry outermost: every fiber of the process is traced, and the last spans are
    // flushed after its layers have closed. Its settings come from the OTEL_* variables.
    Effect.provide(Layer.provideMerge(TracingLive, TelemetrySettings.layer(serviceNameOf(name)))),
    Effect.provide(LoggingLive),
    Effect.tapErrorCause(reportFailure(name)),
    (program) => NodeRuntime.runMain(program, { disableErrorReporting: true, disablePrettyLogger: true })
  )
