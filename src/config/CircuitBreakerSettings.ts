import { Config, Context, Duration, Layer } from "effect"
import { positiveMillisDuration, positiveWhole } from "./configValues.js"

/**
 * The circuit breaker kept per `provider/model` and shared by every process: it opens after
 * `failures` provider-side failures in a row, each within `window` of the one before; stays
 * open `openDuration` (doubling after each failed probe, up to `maxOpenDuration`); then lets one
 * probe call through at a time (a probe unanswered for `probeLease` lets another try), and closes on a success.
 */
export interface CircuitBreakerSettingsShape {
  readonly failures: number
  readonly window: Duration.Duration
  readonly openDuration: Duration.Duration
  readonly maxOpenDuration: Duration.Duration
  readonly probeLease: Duration.Duration
}

export const circuitBreakerDefaults: CircuitBreakerSettingsShape = {
  failures: 3,
  window: Duration.seconds(30),
  openDuration: Duration.seconds(10),
  maxOpenDuration: Duration.seconds(30),
  probeLease: Duration.seconds(60)
}

const oneDay = Duration.days(1)

export class CircuitBreakerSettings extends Context.Tag("ai-job-engine/CircuitBreakerSettings")<
  CircuitBreakerSettings,
  CircuitBreakerSettingsShape
>() {
  /** `AI_BREAKER_FAILURES`, `AI_BREAKER_WINDOW_MS`, `AI_BREAKER_OPEN_MS`, `AI_BREAKER_MAX_OPEN_MS`, `AI_BREAKER_PROBE_LEASE_MS`. */
  static readonly config = Config.all({
    failures: positiveWhole("AI_BREAKER_FAILURES", circuitBreakerDefaults.failures),
    window: positiveMillisDuration("AI_BREAKER_WINDOW_MS", circuitBreakerDefaults.window),
    openDuration: positiveMillisDuration("AI_BREAKER_OPEN_MS", circuitBreakerDefaults.openDuration),
    maxOpenDuration: positiveMillisDuration("AI_BREAKER_MAX_OPEN_MS", circuitBreakerDefaults.maxOpenDuration),
    probeLease: positiveMillisDuration("AI_BREAKER_PROBE_LEASE_MS", circuitBreakerDefaults.probeLease)
  }).pipe(
    Config.validate({
      message: "AI_BREAKER_MAX_OPEN_MS must not be shorter than AI_BREAKER_OPEN_MS, and neither longer than a day",
      validation: (s) =>
        Duration.greaterThanOrEqualTo(s.maxOpenDuration, s.openDuration) &&
        Duration.lessThanOrEqualTo(s.maxOpenDuration, oneDay) && Duration.lessThanOrEqualTo(s.probeLease, oneDay)
    })
  )
  static readonly layer = Layer.effect(CircuitBreakerSettings, CircuitBreakerSettings.config)
  static readonly make = (overrides: Partial<CircuitBreakerSettingsShape> = {}) =>
    Layer.succeed(CircuitBreakerSettings, { ...circuitBreakerDefaults, ...overrides })
}
