import { Effect, Schema } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { performance } from "node:perf_hooks"
import { chatCompletionBody, serveOnLoopback } from "./fakeProviderServer.js"

/**
 * A fake OpenAI-compatible provider that can go down: while down it answers every request 500 at
 * once, as a provider in an outage does. It records each request's time, whether it was down, and
 * the key it carried, so a test can count the calls a dead provider got and check that no other
 * provider's key ever reached it. Answers take `latencyMs`.
 */

export interface ProviderCall {
  /** `performance.now()` when the request arrived. */
  readonly at: number
  readonly down: boolean
  readonly authorization: string | undefined
}

export interface SwitchableProvider {
  readonly name: string
  readonly baseUrl: string
  readonly apiKey: string
  readonly setDown: (down: boolean) => Effect.Effect<void>
  readonly calls: Effect.Effect<ReadonlyArray<ProviderCall>>
}

const ChatRequest = Schema.Struct({ messages: Schema.Array(Schema.Struct({ content: Schema.String })) })
const decodeChatRequest = Schema.decodeUnknownOption(Schema.parseJson(ChatRequest))

export const startSwitchableProvider = (options: {
  readonly name: string
  readonly apiKey: string
  readonly latencyMs: number
  /** The answer's message content for a request's messages. */
  readonly content: (messages: ReadonlyArray<{ readonly content: string }>) => string
}) =>
  Effect.gen(function*() {
    let down = false
    const calls: Array<ProviderCall> = []
    const timers = new Set<NodeJS.Timeout>()
    let answered = 0

    const handle = (req: IncomingMessage, res: ServerResponse, body: string) => {
      calls.push({ at: performance.now(), down, authorization: req.headers.authorization })
      const send = (status: number, payload: string) => {
        if (res.destroyed) return
        res.writeHead(status, { "content-type": "application/json" })
        res.end(payload)
      }
      if (req.headers.authorization !== `Bearer ${options.apiKey}`) {
        return send(401, JSON.stringify({ error: { message: "invalid key", type: "authentication_error" } }))
      }
      if (down) return send(500, JSON.stringify({ error: { message: "outage", type: "server_error" } }))
      const messages = decodeChatRequest(body)
      const content = options.content(messages._tag === "Some" ? messages.value.messages : [])
      const timer = setTimeout(() => {
        timers.delete(timer)
        answered++
        send(
          200,
          chatCompletionBody({ id: `${options.name}-${answered}`, content, promptTokens: 40, completionTokens: 20 })
        )
      }, options.latencyMs)
      timers.add(timer)
      res.on("close", () => {
        clearTimeout(timer)
        timers.delete(timer)
      })
    }

    const port = yield* serveOnLoopback(handle, timers)
    return {
      name: options.name,
      baseUrl: `http://127.0.0.1:${port}`,
      apiKey: options.apiKey,
      setDown: (next) => Effect.sync(() => void (down = next)),
      calls: Effect.sync(() => [...calls])
    } satisfies SwitchableProvider
  })

/** The answer a job type's prompt expects (flashcards or a Feynman evaluation). */
export const answerForPrompt = (messages: ReadonlyArray<{ readonly content: string }>) =>
  messages.some((message) => message.content.includes("Feynman"))
    ? JSON.stringify({ score: 70, feedback: "A fair explanation.", gaps: [] })
    : JSON.stringify({ flashcards: [{ front: "What does chlorophyll absorb?", back: "Light." }] })
