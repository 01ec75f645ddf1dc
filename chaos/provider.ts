import { Effect, Either, Option, Schema, type Scope } from "effect"
import { randomBytes } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import { chatCompletionBody, serveOnLoopback } from "../test/support/fakeProviderServer.js"

/**
 * A fake OpenAI-compatible `/chat/completions` provider for the chaos fleet, with fault modes
 * the run switches between (provider flapping): healthy with a latency, 500, 429 with
 * `Retry-After`, slow (longer than a lease), and 200 with a body that is not JSON. A healthy
 * answer is valid for the job type the prompt asks for; a flashcard answer has exactly the
 * number of cards the prompt allows, so the checker can expect exactly that many rows.
 */

export type ProviderMode = "ok" | "error500" | "rateLimited" | "slow" | "malformed"

export interface ProviderStats {
  readonly calls: number
  /** Calls by the mode the provider was in when each arrived. */
  readonly byMode: Readonly<Record<string, number>>
  /** Requests the client hung up on before the answer (a killed or interrupted worker). */
  readonly abandoned: number
}

export interface ChaosProvider {
  readonly baseUrl: string
  readonly apiKey: string
  readonly setMode: (mode: ProviderMode) => Effect.Effect<void>
  readonly stats: Effect.Effect<ProviderStats>
}

const Request = Schema.parseJson(Schema.Struct({
  messages: Schema.Array(Schema.Struct({ role: Schema.String, content: Schema.String }))
}))
const decodeRequest = Schema.decodeUnknownEither(Request)

const CountData = Schema.parseJson(Schema.Struct({ count: Schema.Int }))
const decodeCount = Schema.decodeUnknownOption(CountData)

/**
 * How many cards the prompt allows: the user message's JSON data (`{ sourceText, count }`), or
 * the count written into the system message (prompts stamped v1).
 */
const cardCountOf = (system: string, user: string): number =>
  Option.getOrElse(
    Option.map(decodeCount(user), (data) => data.count),
    () => Number(/between 1 and (\d+) flashcards/.exec(system)?.[1] ?? 1)
  )

/** The answer a well-behaved model would give to the prompt. */
const contentFor = (system: string, user: string): string => {
  if (system.includes("flashcards")) {
    const n = cardCountOf(system, user)
    return JSON.stringify({
      flashcards: Array.from(
        { length: n },
        (_, i) => ({ front: `What is point ${i + 1}?`, back: `Point ${i + 1} of the text.` })
      )
    })
  }
  if (system.includes("Feynman")) {
    return JSON.stringify({ score: 72, feedback: "A fair explanation with one gap.", gaps: ["no example"] })
  }
  return JSON.stringify({ echo: "chaos" })
}

const completion = (content: string) =>
  chatCompletionBody({ id: "chatcmpl-chaos", content, promptTokens: 120, completionTokens: 60 })

export const startChaosProvider = (options: {
  readonly latencyMs: readonly [number, number]
  readonly slowMs: number
}): Effect.Effect<ChaosProvider, never, Scope.Scope> =>
  Effect.gen(function*() {
    const apiKey = `sk-chaos-${randomBytes(12).toString("hex")}`
    let mode: ProviderMode = "ok"
    let calls = 0
    let abandoned = 0
    const byMode: Record<string, number> = {}
    const timers = new Set<NodeJS.Timeout>()
    const [minLatency, maxLatency] = options.latencyMs

    const answer = (
      res: ServerResponse,
      status: number,
      body: string,
      headers: Readonly<Record<string, string>> = {}
    ) => {
      if (res.destroyed) return
      res.writeHead(status, { "content-type": "application/json", ...headers })
      res.end(body)
    }
    const later = (res: ServerResponse, delayMs: number, send: () => void) => {
      const timer = setTimeout(() => {
        timers.delete(timer)
        send()
      }, delayMs)
      timers.add(timer)
      res.on("close", () => {
        if (timers.delete(timer)) {
          clearTimeout(timer)
          abandoned++
        }
      })
    }

    const handle = (req: IncomingMessage, res: ServerResponse, raw: string) => {
      if (req.method !== "POST" || req.url !== "/chat/completions") return answer(res, 404, "{}")
      if (req.headers.authorization !== `Bearer ${apiKey}`) {
        return answer(res, 401, JSON.stringify({ error: { type: "authentication_error" } }))
      }
      calls++
      byMode[mode] = (byMode[mode] ?? 0) + 1
      const [system, user] = Either.match(decodeRequest(raw), {
        onLeft: () => ["", ""],
        onRight: (body) => [
          body.messages.find((m) => m.role === "system")?.content ?? "",
          body.messages.find((m) => m.role === "user")?.content ?? ""
        ]
      })
      const latency = minLatency + Math.floor(Math.random() * (maxLatency - minLatency + 1))
      switch (mode) {
        case "ok":
          return later(res, latency, () => answer(res, 200, completion(contentFor(system, user))))
        case "error500":
          return answer(
            res,
            500,
            JSON.stringify({ error: { message: "The server had an error", type: "server_error" } })
          )
        case "rateLimited":
          return answer(
            res,
            429,
            JSON.stringify({ error: { message: "Rate limit reached", type: "rate_limit_error" } }),
            { "retry-after": "1" }
          )
        case "slow":
          return later(res, options.slowMs, () => answer(res, 200, completion(contentFor(system, user))))
        case "malformed":
          return later(
            res,
            latency,
            () => answer(res, 200, `{"id": "chatcmpl-chaos", "choices": [{"message": {"content": "{\\"flash`)
          )
      }
    }

    const port = yield* serveOnLoopback(handle, timers)

    return {
      baseUrl: `http://127.0.0.1:${port}`,
      apiKey,
      setMode: (next) => Effect.sync(() => void (mode = next)),
      stats: Effect.sync(() => ({ calls, byMode: { ...byMode }, abandoned }))
    } satisfies ChaosProvider
  })
