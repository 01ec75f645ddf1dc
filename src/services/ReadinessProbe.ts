import { Clock, Context, Duration, Effect, Layer, Option } from "effect"

/**
 * Whether the backing stores answer: the API's `/readyz`, the creation routes' gate (no new AI
 * work while the database or Redis is away) and any main program that wants to wait for its
 * dependencies. Each check is a small round trip with a timeout; a check never fails, it
 * reports `down`.
 */

export interface ReadinessCheck {
  /** What it checks, as `/readyz` names it: `database`, `redis`. */
  readonly name: string
  /** What answers it: `mysql`, `redis`, `memory`. */
  readonly backend: string
  /** One round trip; any failure (or the timeout) means down. */
  readonly ping: Effect.Effect<void, unknown>
  /**
   * Whether a create is refused while this check is down (default true). The database's is
   * not: a create writes to it, so its own failure answers 503, and a ping that only waited
   * for a busy pool must not refuse work the write would have done.
   */
  readonly gatesWrites?: boolean
}

export interface CheckResult {
  readonly name: string
  readonly backend: string
  readonly status: "up" | "down"
  readonly latencyMs: number
}

export interface ReadinessReport {
  readonly ready: boolean
  readonly checks: ReadonlyArray<CheckResult>
}

export class ReadinessProbe extends Context.Tag("ai-job-engine/ReadinessProbe")<
  ReadinessProbe,
  {
    /** Runs every check now, concurrently. */
    readonly check: Effect.Effect<ReadinessReport>
    /** Runs only the checks that gate writes (`gatesWrites`), concurrently. */
    readonly checkWritePath: Effect.Effect<ReadinessReport>
  }
>() {}

export const defaultCheckTimeout = Duration.seconds(1)

const run = (check: ReadinessCheck, timeout: Duration.DurationInput): Effect.Effect<CheckResult> =>
  Effect.gen(function*() {
    const started = yield* Clock.currentTimeMillis
    // Interruptible, so the timeout abandons a ping that hangs (a paused Redis) even for a caller
    // that runs uninterruptibly: the creation routes, whose gate asks this.
    const outcome = yield* check.ping.pipe(Effect.interruptible, Effect.timeoutOption(timeout), Effect.option)
    const ended = yield* Clock.currentTimeMillis
    const up = Option.isSome(outcome) && Option.isSome(outcome.value)
    if (!up) {
      yield* Effect.logWarning("readiness check failed").pipe(
        Effect.annotateLogs({ check: check.name, backend: check.backend })
      )
    }
    return { name: check.name, backend: check.backend, status: up ? "up" : "down", latencyMs: ended - started }
  })

export const makeReadinessProbe = (
  checks: ReadonlyArray<ReadinessCheck>,
  options: { readonly timeout?: Duration.DurationInput } = {}
) => {
  const runAll = (selected: ReadonlyArray<ReadinessCheck>) =>
    Effect.forEach(selected, (c) => run(c, options.timeout ?? defaultCheckTimeout), { concurrency: "unbounded" }).pipe(
      Effect.map((results): ReadinessReport => ({ ready: results.every((r) => r.status === "up"), checks: results }))
    )
  return ReadinessProbe.of({
    check: runAll(checks),
    checkWritePath: runAll(checks.filter((c) => c.gatesWrites !== false))
  })
}

/** A store that lives in this process: always up. */
export const memoryCheck = (name: string): ReadinessCheck => ({ name, backend: "memory", ping: Effect.void })

/** Any checks, e.g. MySQL with the in-process queues. */
export const readinessProbeWith = (
  checks: ReadonlyArray<ReadinessCheck>,
  options: { readonly timeout?: Duration.DurationInput } = {}
) => Layer.succeed(ReadinessProbe, makeReadinessProbe(checks, options))
