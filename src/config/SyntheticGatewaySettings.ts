import { Config, Context, Duration, Layer } from "effect"

/** A synthetic call's latency: fixed, or drawn between `min` and `max`. */
export type SyntheticLatency = Duration.Duration | { readonly min: Duration.Duration; readonly max: Duration.Duration }

/**
 * The synthetic provider (the embedded default's): `SYNTHETIC_SEED` (default `synthetic`),
 * `SYNTHETIC_LATENCY_MS` (`50` or `20-200` milliseconds, default 0), `SYNTHETIC_FAILURE_RATE` (0..1, default 0).
 */
export class SyntheticGatewaySettings extends Context.Tag("ai-job-engine/SyntheticGatewaySettings")<
  SyntheticGatewaySettings,
  { readonly seed: string; readonly latency: SyntheticLatency; readonly failureRate: number }
>() {
  static readonly config = Config.all({
    seed: Config.string("SYNTHETIC_SEED").pipe(Config.withDefault("synthetic")),
    latency: Config.string("SYNTHETIC_LATENCY_MS").pipe(
      Config.withDefault("0"),
      Config.validate({
        message: "SYNTHETIC_LATENCY_MS must be N or MIN-MAX milliseconds",
        validation: (v) => /^\d+(-\d+)?$/.test(v.trim())
      }),
      Config.map((value): SyntheticLatency => {
        const [min = 0, max] = value.trim().split("-").map(Number)
        return max === undefined
          ? Duration.millis(min)
          : { min: Duration.millis(min), max: Duration.millis(Math.max(min, max)) }
      })
    ),
    failureRate: Config.number("SYNTHETIC_FAILURE_RATE").pipe(
      Config.withDefault(0),
      Config.validate({
        message: "SYNTHETIC_FAILURE_RATE must be between 0 and 1",
        validation: (r) => r >= 0 && r <= 1
      })
    )
  })
  static readonly layer = Layer.effect(SyntheticGatewaySettings, SyntheticGatewaySettings.config)
}
