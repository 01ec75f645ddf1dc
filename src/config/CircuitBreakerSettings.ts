import { Config, Context, Layer } from "effect"
import { positiveMillis, positiveWhole } from "./configValues.js"

/**
 * The circuit breaker kept per `provider/model` and shared by every process: it opens after
 * `failures` provider-side failures in a row, each within `windowMs` of the one before; stays
 * open `openMs` (doubling after each failed probe, up to `maxOpenMs`); then lets one probe call
 * through at a time (a probe unanswered for `probeLeaseMs` lets another try), and closes on a success.
 */
export interface CircuitBreakerSettingsShape {
  readonly failures: number
  readonly windowMs: number
  readonly openMs: number
  readonly maxOpenMs: number
  readonly probeLeaseMs: number
}

export const circuitBreakerDefaults: CircuitBreakerSettingsShape = {
  failures: 3,
  windowMs: 30_000,
  openMs: 10_000,
  maxOpenMs: 30_000,
  probeLeaseMs: 60_000
}

export class CircuitBreakerSettings extends Context.Tag("ai-job-engine/CircuitBreakerSettings")<
  CircuitBreakerSettings,
  CircuitBreakerSettingsShape
>() {
  /** `AI_BREAKER_FAILURES`, `AI_BREAKER_WINDOW_MS`, `AI_BREAKER_OPEN_MS`, `AI_BREAKER_MAX_OPEN_MS`, `AI_BREAKER_PROBE_LEASE_MS`. */
  static readonly config = Config.all({
    failures: positiveWhole("AI_BREAKER_FAILURES", circuitBreakerDefaults.failures),
    windowMs: positiveMillis("AI_BREAKER_WINDOW_MS", circuitBreakerDefaults.windowMs),
    openMs: positiveMillis("AI_BREAKER_OPEN_MS", circuitBreakerDefaults.openMs),
    maxOpenMs: positiveMillis("AI_BREAKER_MAX_OPEN_MS", circuitBreakerDefaults.maxOpenMs),
    probeLeaseMs: positiveMillis("AI_BREAKER_PROBE_LEASE_MS", circuitBreakerDefaults.probeLeaseMs)
  }).pipe(
    Config.validate({
      message: "AI_BREAKER_MAX_OPEN_MS must not be shorter than AI_BREAKER_OPEN_MS, and neither longer than a day",
      validation: (s) => s.maxOpenMs >= s.openMs && s.maxOpenMs <= 86_400_000 && s.probeLeaseMs <= 86_400_000
    })
  )
  static readonly layer = Layer.effect(CircuitBreakerSettings, CircuitBreakerSettings.config)
  static readonly make = (overrides: Partial<CircuitBreakerSettingsShape> = {}) =>
    Layer.succeed(CircuitBreakerSettings, { ...circuitBreakerDefaults, ...overrides })
}
