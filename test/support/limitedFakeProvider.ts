import { Effect, Either, Schema, type Scope } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { performance } from "node:perf_hooks"
import { defaultCompletionContent } from "./fakeOpenAiServer.js"
import { chatCompletionBody, serveOnLoopback } from "./fakeProviderServer.js"

/**
 * A fake OpenAI-compatible `/chat/completions` provider that behaves like a real one under load,
 * for the limiter's tests and the bench: answers take a log-normal time, and requests over its
 * RPM / TPM / concurrency limits get 429 with `Retry-After`, as DeepSeek's and OpenAI's do. It
 * counts what it saw, so a test can check the engine stayed within the limits.
 * (`fakeOpenAiServer.ts` stays the scenario-driven fake for the gateway's error handling.)
 */

/** Log-normal latency given by its median and 99th percentile (p99 >= median). */
export interface LatencyDistribution {
  readonly medianMs: number
  readonly p99Ms: number
}

export interface FakeProviderLimits {
  /** Requests accepted in any sliding 60 s window. */
  readonly rpm?: number
  /** Tokens (of the usage it reports) in any sliding 60 s window. */
  readonly tpm?: number
  /** Requests being answered at once. */
  readonly concurrency?: number
}

export interface LimitedFakeProviderOptions {
  readonly apiKey?: string
  readonly latency: LatencyDistribution
  readonly limits?: FakeProviderLimits
  /** The answer's message content (default: a small JSON object). */
  readonly content?: (request: ChatRequest) => string
  /** Completion tokens reported in usage (default 50); prompt tokens are the messages' characters / 4. */
  readonly completionTokens?: number
  /** Uniform [0, 1) source for the latency (default `Math.random`; a seeded one makes runs repeat). */
  readonly random?: () => number
}

export interface LimitedFakeProviderCounters {
  /** Every authenticated `/chat/completions` request, 429s included. */
  readonly requests: number
  readonly succeeded: number
  readonly rateLimited: number
  /** Clients that hung up before the answer. */
  readonly abandoned: number
  /** The most requests (429s included) seen in any 60 s window. */
  readonly maxRequestsInAnyMinute: number
  /** The most accepted requests in any 60 s window. */
  readonly maxAcceptedInAnyMinute: number
  readonly maxTokensInAnyMinute: number
  readonly inFlight: number
  readonly maxInFlight: number
}

export interface LimitedFakeProvider {
  readonly baseUrl: string
  readonly apiKey: string
  readonly counters: Effect.Effect<LimitedFakeProviderCounters>
}

const ChatRequest = Schema.Struct({
  model: Schema.optional(Schema.String),
  messages: Schema.Array(Schema.Struct({ role: Schema.String, content: Schema.String }))
})
export type ChatRequest = typeof ChatRequest.Type
const decodeChatRequest = Schema.decodeUnknownEither(Schema.parseJson(ChatRequest))

const minuteMs = 60_000
/** z of the 99th percentile of the standard normal distribution. */
const z99 = 2.326347874

/** A sampler of the log-normal distribution with this median and p99 (Box-Muller over `random`). */
export const logNormalSampler = (latency: LatencyDistribution, random: () => number = Math.random) => {
  const mu = Math.log(Math.max(latency.medianMs, 1e-3))
  const sigma = Math.max(
    0,
    Math.log(Math.max(latency.p99Ms, latency.medianMs) / Math.max(latency.medianMs, 1e-3)) / z99
  )
  return (): number => {
    const u = 1 - random()
    const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random())
    return Math.exp(mu + sigma * z)
  }
}

/** Timestamps in a sliding minute, with the running maximum of their count (and weight). */
const slidingMinute = () => {
  const entries: Array<{ readonly at: number; readonly weight: number }> = []
  let start = 0
  let total = 0
  let maxCount = 0
  let maxWeight = 0
  const prune = (now: number) => {
    while (start < entries.length && (entries[start]?.at ?? now) <= now - minuteMs) {
      total -= entries[start]?.weight ?? 0
      start++
    }
    if (start > 1_024 && start * 2 > entries.length) {
      entries.splice(0, start)
      start = 0
    }
  }
  return {
    count: (now: number) => (prune(now), entries.length - start),
    weight: (now: number) => (prune(now), total),
    /** When the oldest entry still in the minute arrived. */
    oldest: (now: number) => (prune(now), entries[start]?.at),
    add: (now: number, weight = 1) => {
      prune(now)
      entries.push({ at: now, weight })
      total += weight
      maxCount = Math.max(maxCount, entries.length - start)
      maxWeight = Math.max(maxWeight, total)
    },
    get maxCount() {
      return maxCount
    },
    get maxWeight() {
      return maxWeight
    }
  }
}

const completion = (content: string, promptTokens: number, completionTokens: number) =>
  chatCompletionBody({ id: "chatcmpl-limited", content, promptTokens, completionTokens })

export const startLimitedFakeProvider = (
  options: LimitedFakeProviderOptions
): Effect.Effect<LimitedFakeProvider, never, Scope.Scope> =>
  Effect.gen(function*() {
    const apiKey = options.apiKey ?? "sk-limited-fake"
    const limits = options.limits ?? {}
    const sample = logNormalSampler(options.latency, options.random)
    const completionTokens = options.completionTokens ?? 50
    const seen = slidingMinute()
    const accepted = slidingMinute()
    const tokens = slidingMinute()
    const timers = new Set<NodeJS.Timeout>()
    let requests = 0
    let succeeded = 0
    let rateLimited = 0
    let abandoned = 0
    let inFlight = 0
    let maxInFlight = 0

    const send = (
      res: ServerResponse,
      status: number,
      body: string,
      headers: Readonly<Record<string, string>> = {}
    ) => {
      if (res.destroyed) return
      res.writeHead(status, { "content-type": "application/json", ...headers })
      res.end(body)
    }

    /** Whole seconds until the request would fit, or undefined when it fits now. */
    const retryAfterSeconds = (now: number, weight: number): number | undefined => {
      if (limits.concurrency !== undefined && inFlight >= limits.concurrency) return 1
      if (limits.rpm !== undefined && accepted.count(now) >= limits.rpm) {
        return Math.max(1, Math.ceil(((accepted.oldest(now) ?? now) + minuteMs - now) / 1000))
      }
      if (limits.tpm !== undefined && tokens.weight(now) > 0 && tokens.weight(now) + weight > limits.tpm) {
        return Math.max(1, Math.ceil(((tokens.oldest(now) ?? now) + minuteMs - now) / 1000))
      }
      return undefined
    }

    const handle = (req: IncomingMessage, res: ServerResponse, raw: string) => {
      if (req.method !== "POST" || req.url !== "/chat/completions") return send(res, 404, "{}")
      if (req.headers.authorization !== `Bearer ${apiKey}`) {
        return send(res, 401, JSON.stringify({ error: { type: "authentication_error" } }))
      }
      const now = performance.now()
      requests++
      seen.add(now)
      const request = Either.getOrElse(decodeChatRequest(raw), (): ChatRequest => ({ messages: [] }))
      const promptTokens = Math.ceil(
        request.messages.reduce((sum, message) => sum + message.content.length, 0) / 4
      )
      const weight = promptTokens + completionTokens
      const wait = retryAfterSeconds(now, weight)
      if (wait !== undefined) {
        rateLimited++
        return send(res, 429, JSON.stringify({ error: { message: "Rate limit reached", type: "rate_limit_error" } }), {
          "retry-after": String(wait)
        })
      }
      accepted.add(now)
      tokens.add(now, weight)
      inFlight++
      maxInFlight = Math.max(maxInFlight, inFlight)
      const content = (options.content ?? (() => defaultCompletionContent))(request)
      const timer = setTimeout(() => {
        timers.delete(timer)
        inFlight--
        succeeded++
        send(res, 200, completion(content, promptTokens, completionTokens))
      }, sample())
      timers.add(timer)
      res.on("close", () => {
        if (timers.delete(timer)) {
          clearTimeout(timer)
          inFlight--
          abandoned++
        }
      })
    }

    const port = yield* serveOnLoopback(handle, timers)

    return {
      baseUrl: `http://127.0.0.1:${port}`,
      apiKey,
      counters: Effect.sync(() => ({
        requests,
        succeeded,
        rateLimited,
        abandoned,
        maxRequestsInAnyMinute: seen.maxCount,
        maxAcceptedInAnyMinute: accepted.maxCount,
        maxTokensInAnyMinute: tokens.maxWeight,
        inFlight,
        maxInFlight
      }))
    } satisfies LimitedFakeProvider
  })
