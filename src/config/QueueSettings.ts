import { Config, Context, Layer } from "effect"
import type { QueueName } from "../domain/QueueName.js"

/** How one queue is consumed and retried (docs/architecture.md §7.1). */
export interface QueueSetting {
  /** Jobs one process runs at once. */
  readonly concurrency: number
  /** How long a worker's lock on a job lasts before the queue thinks it died (not a timeout). */
  readonly lockDurationMs: number
  /** Deliveries per job; attempts after the first only cover a crashed worker. */
  readonly attempts: number
  /** First delay of the exponential backoff between deliveries. */
  readonly backoffDelayMs: number
}

export interface QueueSettingsShape {
  readonly queues: Readonly<Record<QueueName, QueueSetting>>
  /** An `add` that takes longer fails with `JobQueueUnavailable` (Redis unreachable). */
  readonly addTimeoutMs: number
  /** On shutdown, how long active deliveries may finish before their signal is aborted. */
  readonly shutdownGraceMs: number
}

/**
 * Each queue's settings as the spec gives them (docs/architecture.md §7.1): every process uses the
 * lock, attempts and backoff; the concurrency is `make`'s, a process defaults to `ioBoundConcurrency`.
 */
export const queueDefaults: Readonly<Record<QueueName, QueueSetting>> = {
  "ai-interactive": { concurrency: 2, lockDurationMs: 30_000, attempts: 2, backoffDelayMs: 2_000 },
  "ai-background": { concurrency: 1, lockDurationMs: 60_000, attempts: 3, backoffDelayMs: 5_000 }
}

/**
 * Jobs a process runs at once by default: a job mostly waits on the provider, so a process holds
 * many; the provider limiter (`AI_RATE_LIMITS`) is what bounds the calls, interactive first.
 */
export const ioBoundConcurrency: Readonly<Record<QueueName, number>> = { "ai-interactive": 50, "ai-background": 20 }

const defaults: QueueSettingsShape = {
  queues: queueDefaults,
  addTimeoutMs: 5_000,
  shutdownGraceMs: 30_000
}

const positiveInt = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.withDefault(fallback),
    Config.validate({ message: `${name} must be a positive whole number`, validation: (n) => n > 0 })
  )

/**
 * The queue settings. Per-process concurrency is `WORKER_CONCURRENCY_INTERACTIVE` /
 * `WORKER_CONCURRENCY_BACKGROUND` (default 50 / 20, for I/O-bound work: the spec's 2 / 1 served a
 * serial worker, the limiter now keeps the provider's limits); the rest is the spec's.
 */
export class QueueSettings extends Context.Tag("ai-job-engine/QueueSettings")<QueueSettings, QueueSettingsShape>() {
  static readonly config = Config.all({
    interactive: positiveInt("WORKER_CONCURRENCY_INTERACTIVE", ioBoundConcurrency["ai-interactive"]),
    background: positiveInt("WORKER_CONCURRENCY_BACKGROUND", ioBoundConcurrency["ai-background"]),
    addTimeoutMs: positiveInt("QUEUE_ADD_TIMEOUT_MS", defaults.addTimeoutMs),
    shutdownGraceMs: positiveInt("WORKER_SHUTDOWN_GRACE_MS", defaults.shutdownGraceMs)
  }).pipe(
    Config.map(({ addTimeoutMs, background, interactive, shutdownGraceMs }): QueueSettingsShape => ({
      queues: {
        "ai-interactive": { ...queueDefaults["ai-interactive"], concurrency: interactive },
        "ai-background": { ...queueDefaults["ai-background"], concurrency: background }
      },
      addTimeoutMs,
      shutdownGraceMs
    }))
  )
  static readonly layer = Layer.effect(QueueSettings, QueueSettings.config)
  static readonly defaults = defaults
  /** The spec's settings with overrides, for tests and simulations. */
  static readonly make = (
    overrides: Partial<Omit<QueueSettingsShape, "queues">> & {
      readonly queues?: Partial<Record<QueueName, Partial<QueueSetting>>>
    } = {}
  ) =>
    Layer.succeed(QueueSettings, {
      addTimeoutMs: overrides.addTimeoutMs ?? defaults.addTimeoutMs,
      shutdownGraceMs: overrides.shutdownGraceMs ?? defaults.shutdownGraceMs,
      queues: {
        "ai-interactive": { ...queueDefaults["ai-interactive"], ...overrides.queues?.["ai-interactive"] },
        "ai-background": { ...queueDefaults["ai-background"], ...overrides.queues?.["ai-background"] }
      }
    })
}
