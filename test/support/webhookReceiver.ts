import { Duration, Effect, type Scope } from "effect"
import { randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { Webhook } from "standardwebhooks"

/** A fresh Standard Webhooks secret: `whsec_` and the base64 of 32 random bytes. */
export const newWebhookSecret = () => `whsec_${randomBytes(32).toString("base64")}`

/** One request the receiver got, and what it made of it. */
export interface ReceivedDelivery {
  readonly path: string
  readonly webhookId: string
  readonly body: string
  /** The body as `standardwebhooks` verified it with the receiver's secret; undefined when it did not verify. */
  readonly verified: unknown
  /** What the receiver answered (0: it held the request and never answered). */
  readonly status: number
}

/** How the receiver answers one request: a status (with headers), or `hold` (never answer). */
export type ReceiverAnswer = number | {
  readonly status: number
  readonly headers?: Readonly<Record<string, string>>
  readonly endless?: boolean
} | "hold"

export interface WebhookReceiver {
  readonly port: number
  readonly url: (path?: string) => string
  readonly deliveries: () => ReadonlyArray<ReceivedDelivery>
  /** Polls (real time) until `done` holds of the deliveries so far. */
  readonly waitFor: (
    done: (deliveries: ReadonlyArray<ReceivedDelivery>) => boolean,
    timeout: Duration.DurationInput
  ) => Effect.Effect<ReadonlyArray<ReceivedDelivery>>
  /** Stops listening (connections refused) and drops held requests; `listen` opens the same port again. */
  readonly close: Effect.Effect<void>
  readonly listen: Effect.Effect<void>
}

const readBody = (request: IncomingMessage) =>
  new Promise<string>((resolve) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    request.on("error", () => resolve(Buffer.concat(chunks).toString("utf8")))
  })

/**
 * A webhook receiver on 127.0.0.1 for tests: it verifies every request with the
 * `standardwebhooks` package (as a real receiver would) and answers as `answer` says, given the
 * request and how many came before it. Closed with the scope.
 */
export const startWebhookReceiver = (options: {
  readonly secret: string
  readonly answer?: (request: { readonly path: string; readonly webhookId: string }, index: number) => ReceiverAnswer
  readonly port?: number
}): Effect.Effect<WebhookReceiver, never, Scope.Scope> =>
  Effect.gen(function*() {
    const verifier = new Webhook(options.secret)
    const received: Array<ReceivedDelivery> = []
    const held = new Set<ServerResponse>()
    const handle = async (request: IncomingMessage, response: ServerResponse) => {
      const body = await readBody(request)
      const header = (name: string) => {
        const value = request.headers[name]
        return typeof value === "string" ? value : ""
      }
      const headers = {
        "webhook-id": header("webhook-id"),
        "webhook-timestamp": header("webhook-timestamp"),
        "webhook-signature": header("webhook-signature")
      }
      let verified: unknown
      try {
        verified = verifier.verify(body, headers)
      } catch {
        verified = undefined
      }
      const path = request.url ?? "/"
      const answer = options.answer?.({ path, webhookId: headers["webhook-id"] }, received.length) ?? 204
      const status = answer === "hold" ? 0 : typeof answer === "number" ? answer : answer.status
      received.push({ path, webhookId: headers["webhook-id"], body, verified, status })
      if (answer === "hold") {
        held.add(response)
        return
      }
      response.writeHead(status, typeof answer === "number" ? {} : { ...answer.headers })
      if (typeof answer === "object" && answer.endless === true) {
        // An answer whose body never ends: only its status can be read.
        const timer = setInterval(() => response.write("x".repeat(1024)), 10)
        response.on("close", () => clearInterval(timer))
        return
      }
      response.end("the receiver's answer body")
    }
    let server: Server | undefined
    let port = options.port ?? 0
    const listen = Effect.async<void>((resume) => {
      const next = createServer((request, response) => void handle(request, response))
      next.listen(port, "127.0.0.1", () => {
        const address = next.address()
        if (typeof address === "object" && address !== null) port = address.port
        server = next
        resume(Effect.void)
      })
    })
    const close = Effect.async<void>((resume) => {
      const current = server
      server = undefined
      if (current === undefined) return resume(Effect.void)
      for (const response of held) response.destroy()
      held.clear()
      current.closeAllConnections()
      current.close(() => resume(Effect.void))
    })
    yield* Effect.acquireRelease(listen, () => close)
    return {
      get port() {
        return port
      },
      url: (path = "/hooks") => `http://127.0.0.1:${port}${path}`,
      deliveries: () => [...received],
      waitFor: (done, timeout) =>
        Effect.gen(function*() {
          const deadline = Date.now() + Duration.toMillis(timeout)
          while (!done(received)) {
            if (Date.now() > deadline) {
              return yield* Effect.dieMessage(
                `webhook receiver: condition not met within ${Duration.format(timeout)}; got ${
                  JSON.stringify(received.map(({ path, status, webhookId }) => ({ path, status, webhookId })))
                }`
              )
            }
            yield* Effect.sleep(Duration.millis(25))
          }
          return [...received]
        }),
      close,
      listen
    }
  })
