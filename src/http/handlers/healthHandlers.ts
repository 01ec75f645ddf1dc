import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { ReadinessProbe } from "../../services/ReadinessProbe.js"
import { AiJobApi } from "../Api.js"
import { NotReady } from "../ApiSchemas.js"

export const HealthHandlersLive = HttpApiBuilder.group(AiJobApi, "health", (handlers) =>
  Effect.gen(function*() {
    const probe = yield* ReadinessProbe
    return handlers
      .handle("alive", () => Effect.succeed({ status: "ok" as const }))
      .handle("ready", () =>
        Effect.gen(function*() {
          const report = yield* probe.check
          if (report.ready) return { status: "ready" as const, checks: report.checks }
          const down = report.checks.filter((c) => c.status === "down").map((c) => c.name)
          return yield* Effect.fail(
            new NotReady({
              message: `not ready: ${down.join(" and ")} ${down.length === 1 ? "does" : "do"} not answer`,
              checks: report.checks
            })
          )
        }))
  }))
