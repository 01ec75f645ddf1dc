import { Config, Context, Duration, Effect, Layer, Option } from "effect"
import { hostname } from "node:os"
import { newId } from "../domain/Ids.js"
import { positiveMillisDuration } from "./configValues.js"

/** The dispatcher's knobs; lock TTL and poll interval come from `TimingConfig`. */
export interface DispatcherSettingsShape {
  /** Who holds a claim (`outbox_event.locked_by`); unique per running dispatcher. */
  readonly dispatcherId: string
  /** Events claimed by one statement. */
  readonly batchSize: number
  /** Queue adds in flight at once within a batch. */
  readonly dispatchConcurrency: number
  /** The failed dispatch that makes an event `dead`. */
  readonly maxAttempts: number
  /** First retry delay after a failed add; doubles per failure (jittered), capped at `retryMaxDelay`. */
  readonly retryBaseDelay: Duration.Duration
  readonly retryMaxDelay: Duration.Duration
  /** How often expired claims are released, at most (and at most half the claim TTL). */
  readonly releaseInterval: Duration.Duration
  /**
   * After an add whose outcome is unknown (timed out, connection lost), how many times to ask
   * whether the queue job exists before counting a failure; each ask is bounded by the queue's
   * own timeout, so a paused Redis is waited for about this many add timeouts.
   */
  readonly addChecks: number
}

const defaults: Omit<DispatcherSettingsShape, "dispatcherId"> = {
  batchSize: 100,
  dispatchConcurrency: 16,
  maxAttempts: 3,
  retryBaseDelay: Duration.seconds(1),
  retryMaxDelay: Duration.minutes(1),
  releaseInterval: Duration.seconds(30),
  addChecks: 3
}

const positiveInt = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.withDefault(fallback),
    Config.validate({ message: `${name} must be a positive whole number`, validation: (n) => n > 0 })
  )

/** A fresh dispatcher id: host, process and a random suffix. */
export const newDispatcherId = Effect.map(newId, (id) => `dispatcher-${hostname()}-${process.pid}-${id.slice(-12)}`)

export class DispatcherSettings extends Context.Tag("ai-job-engine/DispatcherSettings")<
  DispatcherSettings,
  DispatcherSettingsShape
>() {
  /** `OUTBOX_BATCH_SIZE`, `OUTBOX_RETRY_BASE_MS`, `OUTBOX_RETRY_MAX_MS`; `DISPATCHER_ID` or a fresh id. */
  static readonly config = Effect.gen(function*() {
    const config = yield* Config.all({
      dispatcherId: Config.option(Config.nonEmptyString("DISPATCHER_ID")),
      batchSize: positiveInt("OUTBOX_BATCH_SIZE", defaults.batchSize),
      retryBaseDelay: positiveMillisDuration("OUTBOX_RETRY_BASE_MS", defaults.retryBaseDelay),
      retryMaxDelay: positiveMillisDuration("OUTBOX_RETRY_MAX_MS", defaults.retryMaxDelay)
    })
    const dispatcherId = Option.isSome(config.dispatcherId) ? config.dispatcherId.value : yield* newDispatcherId
    return { ...defaults, ...config, dispatcherId }
  })
  static readonly layer = Layer.effect(DispatcherSettings, DispatcherSettings.config)
  static readonly defaults = defaults
  static readonly make = (overrides: Partial<DispatcherSettingsShape> = {}) =>
    Layer.effect(
      DispatcherSettings,
      Effect.map(newDispatcherId, (dispatcherId) => ({ ...defaults, dispatcherId, ...overrides }))
    )
}
