import { Context, Effect, Layer, Queue, Ref } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { chatCompletionBody, serveOnLoopback } from "./fakeProviderServer.js"

/**
 * A fake OpenAI-compatible `/chat/completions` server on 127.0.0.1 (ephemeral port), for the
 * gateway's tests over real HTTP. It checks the bearer key (401 otherwise, echoing the key it
 * got the way some providers do, so tests prove we never log a provider's error text), answers
 * with the current scenario, and records each request and whether the client aborted it.
 */

export type FakeScenario =
  | { readonly _tag: "Success"; readonly content?: string; readonly finishReason?: string }
  | { readonly _tag: "RateLimited"; readonly retryAfter?: string }
  | { readonly _tag: "ServerError"; readonly status?: number }
  /** Answers successfully after `delayMs`, unless the client hangs up first. */
  | { readonly _tag: "Slow"; readonly delayMs: number }
  /**
   * Sends 200 and its headers at once, then keep-alive blank lines (as DeepSeek does while a
   * request waits) and the completion only after `delayMs`.
   */
  | { readonly _tag: "SlowBody"; readonly delayMs: number }
  /** 200 with a body that is not a chat completion (`body` default: valid JSON of the wrong shape). */
  | { readonly _tag: "MalformedBody"; readonly body?: string }
  /** 200, a well-formed completion whose message content is not JSON. */
  | { readonly _tag: "MalformedContent" }
  | { readonly _tag: "ContentFilter" }
  /** 400 with DeepSeek's content-risk error. */
  | { readonly _tag: "ContentRisk400" }
  | {
    readonly _tag: "Status"
    readonly status: number
    readonly body: string
    readonly headers?: Readonly<Record<string, string>>
  }
  /**
   * Answers at once, then blocks this whole process for `freezeMs` (as SIGSTOP or a long GC
   * would): the answer waits in the client's socket while every timer falls due.
   */
  | { readonly _tag: "AnswerThenFreeze"; readonly freezeMs: number }

export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly authorization: string | undefined
  readonly headers: IncomingMessage["headers"]
  readonly body: unknown
  aborted: boolean
  answered: boolean
}

export const defaultCompletionContent = JSON.stringify({ ok: true, answer: 42 })

const completion = (content: string | null, finishReason: string) =>
  chatCompletionBody({ id: "chatcmpl-fake", content, finishReason, promptTokens: 12, completionTokens: 7 })

export interface FakeOpenAiServerShape {
  readonly baseUrl: string
  readonly apiKey: string
  /** Also forgets earlier received/aborted events, so the next `received`/`aborted` are about new requests. */
  readonly setScenario: (scenario: FakeScenario) => Effect.Effect<void>
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** Takes the next "request received" event (wait for the server to hold a request). */
  readonly received: Effect.Effect<RecordedRequest>
  /** Takes the next "client aborted a request" event. */
  readonly aborted: Effect.Effect<RecordedRequest>
}

export const makeFakeOpenAiServer = (options: { readonly apiKey: string }) =>
  Effect.gen(function*() {
    const scenario = yield* Ref.make<FakeScenario>({ _tag: "Success" })
    const requests = yield* Ref.make<ReadonlyArray<RecordedRequest>>([])
    const received = yield* Queue.unbounded<RecordedRequest>()
    const aborted = yield* Queue.unbounded<RecordedRequest>()
    const timers = new Set<NodeJS.Timeout>()

    const handle = (req: IncomingMessage, res: ServerResponse, raw: string) => {
      let body: unknown
      try {
        body = JSON.parse(raw)
      } catch {
        body = raw
      }
      const record: RecordedRequest = {
        method: req.method ?? "",
        path: req.url ?? "",
        authorization: req.headers.authorization,
        headers: req.headers,
        body,
        aborted: false,
        answered: false
      }
      Effect.runSync(Ref.update(requests, (all) => [...all, record]))
      res.on("close", () => {
        if (!res.writableFinished) {
          record.aborted = true
          Effect.runSync(Queue.offer(aborted, record))
        }
      })
      Effect.runSync(Queue.offer(received, record))

      const send = (status: number, payload: string, headers: Readonly<Record<string, string>> = {}) => {
        if (res.destroyed) return
        record.answered = true
        res.writeHead(status, { "content-type": "application/json", ...headers })
        res.end(payload)
      }

      if (req.method !== "POST" || req.url !== "/chat/completions") {
        return send(404, JSON.stringify({ error: { message: "not found", type: "invalid_request_error" } }))
      }
      if (req.headers.authorization !== `Bearer ${options.apiKey}`) {
        const given = (req.headers.authorization ?? "").replace(/^Bearer /, "")
        return send(
          401,
          JSON.stringify({
            error: {
              message: `Incorrect API key provided: ${given}`,
              type: "authentication_error",
              code: "invalid_api_key"
            }
          })
        )
      }
      const current = Effect.runSync(Ref.get(scenario))
      switch (current._tag) {
        case "Success":
          return send(200, completion(current.content ?? defaultCompletionContent, current.finishReason ?? "stop"))
        case "RateLimited":
          return send(
            429,
            JSON.stringify({ error: { message: "Rate limit reached", type: "rate_limit_error" } }),
            current.retryAfter === undefined ? {} : { "retry-after": current.retryAfter }
          )
        case "ServerError":
          return send(
            current.status ?? 500,
            JSON.stringify({ error: { message: "The server had an error", type: "server_error" } })
          )
        case "Slow": {
          const timer = setTimeout(() => {
            timers.delete(timer)
            send(200, completion(defaultCompletionContent, "stop"))
          }, current.delayMs)
          timers.add(timer)
          res.on("close", () => {
            clearTimeout(timer)
            timers.delete(timer)
          })
          return
        }
        case "SlowBody": {
          res.writeHead(200, { "content-type": "application/json" })
          const keepAlive = setInterval(() => res.write("\n"), 50)
          const timer = setTimeout(() => {
            clearInterval(keepAlive)
            record.answered = true
            res.end(completion(defaultCompletionContent, "stop"))
          }, current.delayMs)
          res.on("close", () => {
            clearInterval(keepAlive)
            clearTimeout(timer)
          })
          return
        }
        case "MalformedBody":
          return send(200, current.body ?? JSON.stringify({ object: "chat.completion", choices: "none" }))
        case "MalformedContent":
          return send(200, completion("Sure! Here are your flashcards: front/back...", "stop"))
        case "ContentFilter":
          return send(200, completion(null, "content_filter"))
        case "ContentRisk400":
          return send(
            400,
            JSON.stringify({
              error: { message: "Content Exists Risk", type: "invalid_request_error", code: "invalid_request_error" }
            })
          )
        case "Status":
          return send(current.status, current.body, current.headers)
        case "AnswerThenFreeze": {
          send(200, completion(defaultCompletionContent, "stop"))
          const until = performance.now() + current.freezeMs
          while (performance.now() < until) {
            // Busy: nothing else in this process runs, timers included.
          }
          return
        }
      }
    }

    const port = yield* serveOnLoopback(handle, timers)

    return {
      baseUrl: `http://127.0.0.1:${port}`,
      apiKey: options.apiKey,
      setScenario: (next) =>
        Ref.set(scenario, next).pipe(
          Effect.zipRight(Queue.takeAll(received)),
          Effect.zipRight(Queue.takeAll(aborted)),
          Effect.asVoid
        ),
      requests: Ref.get(requests),
      received: Queue.take(received),
      aborted: Queue.take(aborted)
    } satisfies FakeOpenAiServerShape
  })

export class FakeOpenAiServer extends Context.Tag("test/FakeOpenAiServer")<FakeOpenAiServer, FakeOpenAiServerShape>() {
  static readonly layer = (options: { readonly apiKey: string }) =>
    Layer.scoped(FakeOpenAiServer, makeFakeOpenAiServer(options))
}
