import { Context, Duration, Effect, Layer } from "effect"
import { ApiSettings } from "../config/ApiSettings.js"
import { ReadinessProbe } from "../services/ReadinessProbe.js"
import { PlatformUnavailable, publicMessages } from "./ApiErrors.js"
import { backingStoreUnavailable } from "./errorMapping.js"

/**
 * Whether a request may create AI work: not when `AI_PLATFORM_ENABLED=false`, nor while Redis does
 * not answer (the job would sit undispatched). The database is not pinged: the create's own write
 * answers 503 if it fails, and a ping on a busy pool would refuse doable work. The answer is reused
 * for a second, so a burst of creates costs one round trip.
 */
export class PlatformGate extends Context.Tag("ai-job-engine/http/PlatformGate")<
  PlatformGate,
  { readonly ensureOpen: Effect.Effect<void, PlatformUnavailable> }
>() {}

export const PlatformGateLive = Layer.effect(
  PlatformGate,
  Effect.gen(function*() {
    const settings = yield* ApiSettings
    const probe = yield* ReadinessProbe
    const readiness = yield* Effect.cachedWithTTL(probe.checkWritePath, Duration.seconds(1))
    const ensureOpen = Effect.gen(function*() {
      if (!settings.platformEnabled) {
        return yield* Effect.fail(new PlatformUnavailable({ message: publicMessages.platformDisabled }))
      }
      const report = yield* readiness
      if (!report.ready) {
        const down = report.checks.filter((c) => c.status === "down").map((c) => c.name)
        yield* Effect.logWarning("refusing new work: a backing store does not answer").pipe(
          Effect.annotateLogs({ down: down.join(",") })
        )
        return yield* backingStoreUnavailable
      }
    })
    return PlatformGate.of({ ensureOpen })
  })
)
