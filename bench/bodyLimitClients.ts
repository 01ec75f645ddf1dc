/**
 * Child process of `bench/bodyLimit.ts`: `clients` senders, each POSTing bodies of `bytes` one
 * after another (chunked and with a Content-Length, alternating) until `seconds` have passed,
 * each stopping when the answer arrives. Prints one JSON line: how many answers of each kind
 * and how many bytes were written. In its own process so that its writing does not slow the
 * parent's /healthz probe.
 *
 * argv[2]: JSON `{ port, token, clients, bytes, seconds }`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Schema } from "effect"
import { request as httpRequest } from "node:http"

const Args = Schema.parseJson(
  Schema.Struct({
    port: Schema.Int,
    token: Schema.String,
    clients: Schema.Int,
    bytes: Schema.Int,
    seconds: Schema.Number
  })
)

const filler = Buffer.alloc(64 * 1024, " ")

/** Sends one body of `bytes`, stopping when the answer arrives; its status (0: connection closed first). */
const sendBody = (port: number, token: string, bytes: number, chunked: boolean) =>
  Effect.async<{ readonly status: number; readonly sent: number }>((resume) => {
    let sent = 0
    let answered = false
    let settled = false
    const settle = (status: number) => {
      if (settled) return
      settled = true
      resume(Effect.succeed({ status, sent }))
    }
    const headers: Record<string, string> = { "content-type": "application/json", authorization: `Bearer ${token}` }
    if (chunked) headers["transfer-encoding"] = "chunked"
    else headers["content-length"] = String(bytes)
    const client = httpRequest({
      host: "127.0.0.1",
      port,
      path: "/api/ai/flashcard-generations",
      method: "POST",
      headers,
      agent: false
    })
    client.on("response", (response) => {
      answered = true
      response.resume()
      response.on("end", () => settle(response.statusCode ?? 0))
      response.on("error", () => settle(response.statusCode ?? 0))
    })
    client.on("error", () => settle(0))
    const pump = () => {
      while (!answered && sent < bytes) {
        const size = Math.min(filler.length, bytes - sent)
        sent += size
        if (!client.write(filler.subarray(0, size))) {
          client.once("drain", pump)
          return
        }
      }
      if (!answered) client.end()
    }
    pump()
    return Effect.sync(() => client.destroy())
  })

const program = Effect.gen(function*() {
  const { port, token, clients, bytes, seconds } = yield* Schema.decodeUnknown(Args)(process.argv[2] ?? "")
  const deadline = performance.now() + seconds * 1000
  const answers: Record<string, number> = {}
  let written = 0
  const sender = (index: number) =>
    Effect.gen(function*() {
      for (let attempt = 0; performance.now() < deadline; attempt++) {
        const chunked = (index + attempt) % 2 === 0
        const result = yield* sendBody(port, token, bytes, chunked)
        const key = `${chunked ? "chunked" : "length"} ${result.status === 0 ? "reset" : result.status}`
        answers[key] = (answers[key] ?? 0) + 1
        written += result.sent
      }
    })
  yield* Effect.all(Array.from({ length: clients }, (_, i) => sender(i)), { concurrency: "unbounded" })
  yield* Effect.sync(() => process.stdout.write(JSON.stringify({ answers, written }) + "\n"))
})

NodeRuntime.runMain(program)
