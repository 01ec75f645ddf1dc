import { Config, Context, Duration, Layer } from "effect"
import type { QueueName } from "../domain/QueueName.js"
import { positiveWhole } from "./configValues.js"

export interface QueueSetting {
  /** Jobs one process runs at once. */
  readonly concurrency: number
  /** How long a worker's lock on a job lasts before the queue thinks it died (not a timeout). */
  readonly lockDuration: Duration.Duration
  /** Deliveries per job; attempts after the first only cover a crashed worker. */
  readonly attempts: number
  /** First delay of the exponential backoff between deliveries. */
  readonly backoffDelay: Duration.Duration
}

export interface QueueSettingsShape {
  readonly queues: Readonly<Record<QueueName, QueueSetting>>
  /** `QUEUE_ADD_TIMEOUT_MS`: an `add` that takes longer fails with `JobQueueUnavailable` (Redis unreachable). */
  readonly addTimeout: Duration.Duration
  /** `WORKER_SHUTDOWN_GRACE_MS`: on shutdown, how long active deliveries may finish before their signal is aborted. */
  readonly shutdownGrace: Duration.Duration
}

/**
 * Each queue's settings as the spec gives them (docs/architecture.md §7.1): every process uses the
 * lock, attempts and backoff; the concurrency is `make`'s, a process defaults to `ioBoundConcurrency`.
 */
export const queueDefaults: Readonly<Record<QueueName, QueueSetting>> = {
  "ai-interactive": {
    concurrency: 2,
    lockDuration: Duration.seconds(30),
    attempts: 2,
    backoffDelay: Duration.seconds(2)
  },
  "ai-background": {
    concurrency: 1,
    lockDuration: Duration.seconds(60),
    attempts: 3,
    backoffDelay: Duration.seconds(5)
  }
}

/**
 * Jobs a process runs at once by default: a job mostly waits on the provider, so a process holds
 * many; the provider limiter (`AI_RATE_LIMITS`) is what bounds the calls, interactive first.
 */
export const ioBoundConcurrency: Readonly<Record<QueueName, number>> = { "ai-interactive": 50, "ai-background": 20 }

const defaults: QueueSettingsShape = {
  queues: queueDefaults,
  addTimeout: Duration.seconds(5),
  shutdownGrace: Duration.seconds(30)
}

const wholeMillis = (name: string, fallback: Duration.Duration) =>
  positiveWhole(name, Duration.toMillis(fallback)).pipe(Config.map(Duration.millis))

/**
 * The queue settings. Per-process concurrency is `WORKER_CONCURRENCY_INTERACTIVE` /
 * `WORKER_CONCURRENCY_BACKGROUND` (default 50 / 20, for I/O-bound work: the spec's 2 / 1 served a
 * serial worker, the limiter now keeps the provider's limits); the rest is the spec's.
 */
export class QueueSettings extends Context.Tag("ai-job-engine/QueueSettings")<QueueSettings, QueueSettingsShape>() {
  static readonly config = Config.all({
    interactive: positiveWhole("WORKER_CONCURRENCY_INTERACTIVE", ioBoundConcurrency["ai-interactive"]),
    background: positiveWhole("WORKER_CONCURRENCY_BACKGROUND", ioBoundConcurrency["ai-background"]),
    addTimeout: wholeMillis("QUEUE_ADD_TIMEOUT_MS", defaults.addTimeout),
    shutdownGrace: wholeMillis("WORKER_SHUTDOWN_GRACE_MS", defaults.shutdownGrace)
  }).pipe(
    Config.map(({ addTimeout, background, interactive, shutdownGrace }): QueueSettingsShape => ({
      queues: {
        "ai-interactive": { ...queueDefaults["ai-interactive"], concurrency: interactive },
        "ai-background": { ...queueDefaults["ai-background"], concurrency: background }
      },
      addTimeout,
      shutdownGrace
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
      addTimeout: overrides.addTimeout ?? defaults.addTimeout,
      shutdownGrace: overrides.shutdownGrace ?? defaults.shutdownGrace,
      queues: {
        "ai-interactive": { ...queueDefaults["ai-interactive"], ...overrides.queues?.["ai-interactive"] },
        "ai-background": { ...queueDefaults["ai-background"], ...overrides.queues?.["ai-background"] }
      }
    })
}
