import { Effect } from "effect"
import { request as httpRequest } from "node:http"
import { connect } from "node:net"

/** What a client that streams a large body saw. */
export interface StreamedExchange {
  readonly status: number
  readonly text: string
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  /** Body bytes the client had handed to its socket when the answer's head arrived. */
  readonly sentWhenAnswered: number
  /** Whether the client got to send the whole body. */
  readonly sentAll: boolean
}

/**
 * POSTs a body of `totalBytes` (repeated `filler`), chunked or with its Content-Length, writing
 * as fast as the socket takes it and stopping as soon as the answer's head arrives (what a
 * well-behaved client does with an early answer). `headOnly` sends the head and no body.
 */
export const streamBody = (
  baseUrl: string,
  path: string,
  options: {
    readonly totalBytes: number
    readonly contentType: string
    readonly token?: string | undefined
    readonly chunked?: boolean
    readonly headOnly?: boolean
    readonly filler?: string
  }
) =>
  Effect.async<StreamedExchange, Error>((resume) => {
    const url = new URL(path, baseUrl)
    const chunk = Buffer.alloc(64 * 1024, options.filler ?? " ")
    const headers: Record<string, string> = { "content-type": options.contentType }
    if (options.token !== undefined) headers["authorization"] = `Bearer ${options.token}`
    if (options.chunked === true) headers["transfer-encoding"] = "chunked"
    else headers["content-length"] = String(options.totalBytes)
    let sent = 0
    let answered = false
    let settled = false
    const settle = (outcome: Effect.Effect<StreamedExchange, Error>) => {
      if (settled) return
      settled = true
      resume(outcome)
    }
    const client = httpRequest({
      host: url.hostname,
      port: url.port,
      path: url.pathname + url.search,
      method: "POST",
      headers,
      agent: false
    })
    client.on("response", (response) => {
      answered = true
      const sentWhenAnswered = sent
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (part: string) => {
        text += part
      })
      const done = () =>
        settle(
          Effect.succeed({
            status: response.statusCode ?? 0,
            text,
            headers: response.headers,
            sentWhenAnswered,
            sentAll: sent >= options.totalBytes
          })
        )
      response.on("end", done)
      response.on("error", done)
    })
    client.on("error", (error) => {
      if (!answered) settle(Effect.fail(error))
    })
    const pump = () => {
      while (!answered && sent < options.totalBytes) {
        const size = Math.min(chunk.length, options.totalBytes - sent)
        sent += size
        if (!client.write(chunk.subarray(0, size))) {
          client.once("drain", pump)
          return
        }
      }
      if (!answered) client.end()
    }
    if (options.headOnly === true) client.flushHeaders()
    else pump()
    return Effect.sync(() => client.destroy())
  })

/**
 * Opens a connection, writes `head` (possibly an unfinished request) and nothing more, and
 * waits until the server closes it. Returns what the server sent before closing.
 */
export const stallAndWaitForClose = (baseUrl: string, head: string) =>
  Effect.async<string>((resume) => {
    const url = new URL(baseUrl)
    const socket = connect({ host: url.hostname, port: Number(url.port) }, () => socket.write(head))
    let received = ""
    socket.setEncoding("utf8")
    socket.on("data", (part: string) => {
      received += part
    })
    socket.on("error", () => undefined)
    socket.on("close", () => resume(Effect.succeed(received)))
    return Effect.sync(() => socket.destroy())
  })

/** What a client that keeps sending after the answer saw. */
export interface BlastedExchange {
  /** Everything the server sent before the connection ended. */
  readonly received: string
  /** The socket error that ended it (`ECONNRESET` when the server reset the connection), if any. */
  readonly error: string | undefined
}

/**
 * POSTs a body of `totalBytes` with its Content-Length over a raw socket, writing as fast as the
 * socket takes it and not stopping for an early answer (what a load tool or a naive client does),
 * until the whole body is sent (then it ends its side) or the connection ends. Returns what the
 * server sent.
 */
export const blastBody = (
  baseUrl: string,
  path: string,
  options: { readonly totalBytes: number; readonly token?: string | undefined }
) =>
  Effect.async<BlastedExchange>((resume) => {
    const url = new URL(baseUrl)
    const chunk = Buffer.alloc(256 * 1024, " ")
    const head = [
      `POST ${path} HTTP/1.1`,
      `Host: ${url.host}`,
      "Content-Type: application/json",
      `Content-Length: ${options.totalBytes}`,
      ...(options.token === undefined ? [] : [`Authorization: Bearer ${options.token}`]),
      "",
      ""
    ].join("\r\n")
    const chunks: Array<Buffer> = []
    let error: string | undefined
    let sent = 0
    const socket = connect({ host: url.hostname, port: Number(url.port) }, () => {
      socket.write(head)
      pump()
    })
    const pump = () => {
      while (sent < options.totalBytes && !socket.destroyed) {
        const size = Math.min(chunk.length, options.totalBytes - sent)
        sent += size
        if (!socket.write(chunk.subarray(0, size))) {
          socket.once("drain", pump)
          return
        }
      }
      // All sent: this client is done with the connection.
      if (!socket.destroyed) socket.end()
    }
    socket.on("data", (part: Buffer) => chunks.push(part))
    socket.on("error", (cause: NodeJS.ErrnoException) => {
      error = cause.code ?? cause.message
    })
    socket.on("close", () => resume(Effect.succeed({ received: Buffer.concat(chunks).toString("utf8"), error })))
    return Effect.sync(() => socket.destroy())
  })
