import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { ProviderCircuitBreaker } from "../../src/services/ProviderCircuitBreaker.js"
import { UsageLog } from "../../src/services/UsageLog.js"
import { parsePrometheusText, sampleValue } from "../support/prometheusParser.js"
import { bodyAs, flashcardBody, memoryEngine, startApi, tokenFor, withScope } from "./support/harness.js"

const Providers = Schema.Struct({
  providers: Schema.Array(Schema.Struct({
    provider: Schema.String,
    model: Schema.String,
    breaker: Schema.String,
    failures: Schema.Number,
    openUntil: Schema.NullOr(Schema.String)
  }))
})

const breakerGauge = { provider: "deepseek", model: "deepseek-chat" }

describe("a provider's circuit breaker as operators see it", () => {
  it.live("the stats page and /metrics show the breaker closed, then open while the provider fails", () =>
    withScope(Effect.gen(function*() {
      const api = yield* startApi(memoryEngine())
      const admin = yield* tokenFor("ops", "SUPER_ADMIN")
      const stats = Effect.flatMap(api.request("GET", "/admin-api/ai/stats", { token: admin }), bodyAs(Providers))
      const scrape = Effect.map(
        api.request("GET", "/metrics", { token: admin }),
        (response) => parsePrometheusText(response.text)
      )

      expect((yield* stats).providers).toStrictEqual([{
        provider: "deepseek",
        model: "deepseek-chat",
        breaker: "closed",
        failures: 0,
        openUntil: null
      }])

      // The provider fails call after call (as EXECUTE reports each provider-side failure).
      yield* api.run(
        Effect.flatMap(
          ProviderCircuitBreaker,
          (breaker) => Effect.repeatN(breaker.record("deepseek/deepseek-chat", { _tag: "Call" }, "failure"), 2)
        )
      )
      const open = (yield* stats).providers[0]
      expect([open?.breaker, open?.failures, typeof open?.openUntil]).toStrictEqual(["open", 3, "string"])
      expect(sampleValue(yield* scrape, "ai_provider_circuit_state", breakerGauge)).toBe(2)
    })))
})

const Timeline = Schema.Struct({
  attempts: Schema.Array(Schema.Struct({
    calls: Schema.Array(
      Schema.Struct({
        provider: Schema.String,
        model: Schema.String,
        totalTokens: Schema.Number,
        tokensEstimated: Schema.Boolean
      })
    )
  }))
})
const Created = Schema.Struct({ jobId: Schema.String })

describe("a call whose answer reported no usage", () => {
  it.live("shows in the job's timeline with its tokens marked estimated, beside a call the provider counted", () =>
    withScope(Effect.gen(function*() {
      const api = yield* startApi(memoryEngine())
      const admin = yield* tokenFor("ops", "SUPER_ADMIN")
      const user = yield* tokenFor("user-estimated")
      const { jobId } = yield* Effect.flatMap(
        api.request("POST", "/api/ai/flashcard-generations", { token: user, body: flashcardBody() }),
        bodyAs(Created)
      )
      const row = (attemptNo: number, provider: string, usageEstimated: boolean) => ({
        id: `call-${attemptNo}`,
        jobId,
        leaseNo: 1,
        attemptNo,
        credentialMode: "platform_key",
        provider,
        model: "m",
        promptTokens: 30,
        completionTokens: 12,
        totalTokens: 42,
        costMicros: 1,
        latencyMs: 900,
        errorCode: null,
        ...(usageEstimated ? { usageEstimated: true as const } : {})
      })
      yield* api.run(
        Effect.flatMap(
          UsageLog,
          (usage) => Effect.zipRight(usage.record(row(1, "primary", false)), usage.record(row(2, "backup", true)))
        )
      )
      const timeline = yield* Effect.flatMap(
        api.request("GET", `/admin-api/ai/jobs/${jobId}/timeline`, { token: admin }),
        bodyAs(Timeline)
      )
      expect(timeline.attempts[0]?.calls.map((call) => [call.provider, call.tokensEstimated])).toStrictEqual([[
        "primary",
        false
      ], ["backup", true]])
    })))
})
