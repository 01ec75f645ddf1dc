import { HttpClient, HttpClientRequest } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  type LimitedFakeProviderOptions,
  logNormalSampler,
  startLimitedFakeProvider
} from "../../support/limitedFakeProvider.js"

/** mulberry32: a seeded uniform source, so the distribution check always sees the same draws. */
const seeded = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const quantile = (sorted: ReadonlyArray<number>, q: number) => sorted[Math.floor(q * (sorted.length - 1))] ?? Number.NaN

/** Starts the fake and sends `count` chat requests (all at once when `parallel`); answers status and Retry-After. */
const exchange = (options: LimitedFakeProviderOptions, count: number, parallel: boolean, key?: string) =>
  Effect.scoped(
    Effect.gen(function*() {
      const provider = yield* startLimitedFakeProvider(options)
      const client = yield* HttpClient.HttpClient
      const send = Effect.flatMap(
        client.execute(
          HttpClientRequest.post(`${provider.baseUrl}/chat/completions`).pipe(
            HttpClientRequest.bearerToken(key ?? provider.apiKey),
            HttpClientRequest.bodyUnsafeJson({ model: "deepseek-chat", messages: [{ role: "user", content: "abcd" }] })
          )
        ),
        (response) => Effect.as(response.text, { status: response.status, retryAfter: response.headers["retry-after"] })
      )
      const answers = yield* Effect.forEach(Array.from({ length: count }), () => send, {
        concurrency: parallel ? "unbounded" : 1
      })
      return { answers, counters: yield* provider.counters }
    })
  ).pipe(Effect.provide(NodeHttpClient.layerUndici), Effect.orDie)

const instant = { medianMs: 1, p99Ms: 1 }

describe("limited fake provider", () => {
  it("draws latencies with the median and p99 it was given (log-normal)", () => {
    const sample = logNormalSampler({ medianMs: 2_000, p99Ms: 15_000 }, seeded(17))
    const draws = Array.from({ length: 50_000 }, sample).sort((a, b) => a - b)
    expect(quantile(draws, 0.5)).toBeGreaterThan(2_000 * 0.96)
    expect(quantile(draws, 0.5)).toBeLessThan(2_000 * 1.04)
    expect(quantile(draws, 0.99)).toBeGreaterThan(15_000 * 0.9)
    expect(quantile(draws, 0.99)).toBeLessThan(15_000 * 1.1)
    // A fixed latency is the degenerate case.
    expect(logNormalSampler({ medianMs: 300, p99Ms: 300 }, seeded(1))()).toBeCloseTo(300, 6)
  })

  it.live("answers 429 with Retry-After over its RPM, and counts what it saw", () =>
    Effect.gen(function*() {
      const { answers, counters } = yield* exchange({ latency: instant, limits: { rpm: 3 } }, 5, false)
      expect(answers.map((answer) => answer.status)).toStrictEqual([200, 200, 200, 429, 429])
      for (const answer of answers.slice(3)) {
        expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1)
        expect(Number(answer.retryAfter)).toBeLessThanOrEqual(60)
      }
      expect(counters).toMatchObject({
        requests: 5,
        succeeded: 3,
        rateLimited: 2,
        maxRequestsInAnyMinute: 5,
        maxAcceptedInAnyMinute: 3,
        maxInFlight: 1,
        inFlight: 0
      })
    }))

  it.live("answers 429 over its concurrency while calls are being answered", () =>
    Effect.gen(function*() {
      const { answers, counters } = yield* exchange(
        { latency: { medianMs: 300, p99Ms: 300 }, limits: { concurrency: 2 } },
        4,
        true
      )
      expect(answers.map((answer) => answer.status).sort()).toStrictEqual([200, 200, 429, 429])
      expect(answers.filter((answer) => answer.status === 429).map((answer) => answer.retryAfter)).toStrictEqual([
        "1",
        "1"
      ])
      expect(counters).toMatchObject({ requests: 4, succeeded: 2, rateLimited: 2, maxInFlight: 2, inFlight: 0 })
    }))

  it.live("answers 429 over its TPM, counting the usage it reports", () =>
    Effect.gen(function*() {
      // "abcd" is 1 prompt token; each answer reports 1 + 50.
      const { answers, counters } = yield* exchange(
        { latency: instant, limits: { tpm: 120 }, completionTokens: 50 },
        3,
        false
      )
      expect(answers.map((answer) => answer.status)).toStrictEqual([200, 200, 429])
      expect(counters).toMatchObject({ succeeded: 2, rateLimited: 1, maxTokensInAnyMinute: 102 })
    }))

  it.live("refuses a wrong key without counting it", () =>
    Effect.gen(function*() {
      const { answers, counters } = yield* exchange({ latency: instant }, 1, false, "sk-wrong")
      expect(answers.map((answer) => answer.status)).toStrictEqual([401])
      expect(counters.requests).toBe(0)
    }))
})
