import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either } from "effect"
import { ProviderLimitsConfig } from "../../../src/config/ProviderLimitsConfig.js"
import { pauseUntilFromHeaders } from "../../../src/layers/rateLimitHeaders.js"

const withEnv = (env: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

describe("AI_RATE_LIMITS", () => {
  it.effect("reads limits per provider/model; a model without an entry is unlimited", () =>
    Effect.gen(function*() {
      const limits = yield* ProviderLimitsConfig.config.pipe(
        withEnv({
          AI_RATE_LIMITS:
            `{"deepseek/deepseek-chat":{"rpm":600,"tpm":1000000,"concurrency":200},"openai/gpt-4o-mini":{"rpm":60}}`
        })
      )
      expect(limits.limitFor("deepseek/deepseek-chat")).toStrictEqual({ rpm: 600, tpm: 1_000_000, concurrency: 200 })
      expect(limits.limitFor("openai/gpt-4o-mini")).toStrictEqual({ rpm: 60 })
      expect(limits.limitFor("deepseek/deepseek-reasoner")).toBeUndefined()
      expect((yield* ProviderLimitsConfig.config.pipe(withEnv({}))).limitFor("deepseek/deepseek-chat")).toBeUndefined()
    }))

  it.effect("rejects what it cannot enforce, naming the variable", () =>
    Effect.gen(function*() {
      for (
        const bad of [
          "not json",
          `{"deepseek-chat":{"rpm":1}}`,
          `{"deepseek/deepseek-chat":{"rpm":0}}`,
          `{"deepseek/deepseek-chat":{"tpm":1.5}}`,
          `{"deepseek/deepseek-chat":{"concurrency":4,"minConcurrency":8}}`,
          `{"deepseek/deepseek-chat":{"rpn":600}}`,
          `[]`
        ]
      ) {
        const result = yield* Effect.either(ProviderLimitsConfig.config.pipe(withEnv({ AI_RATE_LIMITS: bad })))
        expect(Either.isLeft(result) && String(result.left), bad).toContain("AI_RATE_LIMITS")
      }
    }))
})

describe("pause from a provider's rate-limit headers", () => {
  const now = 1_700_000_000_000

  it("takes the latest of Retry-After, retry-after-ms and the x-ratelimit-reset-* durations", () => {
    expect(pauseUntilFromHeaders({ "retry-after": "3" }, now)).toBe(now + 3_000)
    expect(pauseUntilFromHeaders({ "Retry-After": new Date(now + 7_000).toUTCString() }, now)).toBe(now + 7_000)
    expect(pauseUntilFromHeaders({ "retry-after-ms": "250" }, now)).toBe(now + 250)
    expect(pauseUntilFromHeaders({ "x-ratelimit-reset-requests": "6m0s", "x-ratelimit-reset-tokens": "20ms" }, now))
      .toBe(now + 360_000)
    expect(pauseUntilFromHeaders({ "x-ratelimit-reset-tokens": "1h2m3.5s", "retry-after": "1" }, now)).toBe(
      now + 3_723_500
    )
    expect(pauseUntilFromHeaders({ "x-ratelimit-reset-requests": "2.5" }, now)).toBe(now + 2_500)
    expect(pauseUntilFromHeaders({ "x-ratelimit-reset-requests": String(now / 1000 + 9) }, now)).toBe(now + 9_000)
  })

  it("says nothing when the answer gives no usable hint", () => {
    expect(pauseUntilFromHeaders({}, now)).toBeUndefined()
    expect(pauseUntilFromHeaders({ "retry-after": "soon", "x-ratelimit-reset-tokens": "later" }, now)).toBeUndefined()
    // A number too long to be finite is no hint either.
    expect(pauseUntilFromHeaders({ "retry-after": "9".repeat(400) }, now)).toBeUndefined()
    // Empty or blank values, and a header present without a value.
    const blank = {
      "retry-after": "",
      "retry-after-ms": " ",
      "x-ratelimit-reset-requests": "",
      "x-ratelimit-reset-tokens": "  "
    }
    expect(pauseUntilFromHeaders(blank, now)).toBeUndefined()
    expect(pauseUntilFromHeaders({ "retry-after": undefined, "Retry-After": "2" }, now)).toBe(now + 2_000)
  })

  it("reads values with spaces around them, every digit of a duration, and only whole durations", () => {
    expect(pauseUntilFromHeaders({ "retry-after": " 4 " }, now)).toBe(now + 4_000)
    expect(pauseUntilFromHeaders({ "x-ratelimit-reset-requests": "12s" }, now)).toBe(now + 12_000)
    expect(pauseUntilFromHeaders({ "x-ratelimit-reset-requests": "1.25s" }, now)).toBe(now + 1_250)
    expect(pauseUntilFromHeaders({ "x-ratelimit-reset-requests": "1m30.75s" }, now)).toBe(now + 90_750)
    expect(pauseUntilFromHeaders({ "x-ratelimit-reset-requests": "x5s" }, now)).toBeUndefined()
    expect(pauseUntilFromHeaders({ "x-ratelimit-reset-requests": "5sx" }, now)).toBeUndefined()
    // Up to 1e9 a bare number is seconds to wait; above it, epoch seconds.
    expect(pauseUntilFromHeaders({ "x-ratelimit-reset-requests": "1000000000" }, now)).toBe(now + 1e12)
  })
})
