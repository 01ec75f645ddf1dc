import { Effect, type Scope } from "effect"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"

/** What the fake providers share: an OpenAI chat-completion answer and a loopback HTTP server. */

/** A `/chat/completions` answer body, as OpenAI-compatible providers send it. */
export const chatCompletionBody = (answer: {
  readonly id: string
  readonly content: string | null
  readonly finishReason?: string
  readonly promptTokens: number
  readonly completionTokens: number
}) =>
  JSON.stringify({
    id: answer.id,
    object: "chat.completion",
    created: 1_700_000_000,
    model: "deepseek-chat",
    choices: [{
      index: 0,
      message: { role: "assistant", content: answer.content },
      finish_reason: answer.finishReason ?? "stop"
    }],
    usage: {
      prompt_tokens: answer.promptTokens,
      completion_tokens: answer.completionTokens,
      total_tokens: answer.promptTokens + answer.completionTokens
    }
  })

/**
 * Serves `handle` (given each request with its whole body as text) on a free port of 127.0.0.1
 * for the scope; closing it clears `timers` (answers still scheduled) and drops open connections.
 */
export const serveOnLoopback = (
  handle: (req: IncomingMessage, res: ServerResponse, body: string) => void,
  timers: Set<NodeJS.Timeout>
): Effect.Effect<number, never, Scope.Scope> => {
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => handle(req, res, Buffer.concat(chunks).toString("utf8")))
  })
  return Effect.acquireRelease(
    Effect.async<number>((resume) => {
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : 0))
      })
    }),
    () =>
      Effect.async<void>((resume) => {
        for (const timer of timers) clearTimeout(timer)
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )
}
