import {
  HttpApp,
  HttpIncomingMessage,
  HttpMiddleware,
  HttpServerError,
  HttpServerRequest,
  HttpServerResponse,
  Multipart,
  UrlParams
} from "@effect/platform"
import { Data, Effect, Inspectable, Stream } from "effect"
import { IncomingMessage } from "node:http"
import { InvalidRequest, PayloadTooLarge, UnsupportedMediaType } from "./ApiErrors.js"

/**
 * Request bodies are JSON, read into memory up to `HTTP_MAX_BODY_BYTES` and never past it: a
 * larger declared length is refused before a byte is read, a chunked body cut off as it passes the
 * limit. Anything but `application/json` is refused unread (multipart is never spooled to disk).
 * A body that is not UTF-8, nests deeper than `maxJsonDepth` or holds a lone surrogate is a 400.
 */

/** Our bodies nest three levels at most; this leaves room while keeping recursion shallow. */
export const maxJsonDepth = 32

export class RequestBodyRejected extends Data.TaggedError("RequestBodyRejected")<{
  readonly reason: "TooLarge" | "NotUtf8" | "NotJson" | "TooDeep" | "NotUnicode" | "Unreadable"
  readonly limit: number
}> {}

export const payloadTooLarge = (limit: number) =>
  new PayloadTooLarge({ message: `The request body is larger than ${limit} bytes, the most this server reads.` })

const unsupportedMediaType = () =>
  new UnsupportedMediaType({ message: "A request body must be sent as Content-Type: application/json (UTF-8)." })

const rejectionMessages: Record<Exclude<RequestBodyRejected["reason"], "TooLarge">, string> = {
  NotUtf8: "body: is not valid UTF-8",
  NotJson: "body: is not valid JSON",
  TooDeep: `body: is nested deeper than ${maxJsonDepth} levels`,
  NotUnicode: "body: contains a string that is not valid Unicode (a lone surrogate)",
  Unreadable: "body: could not be read"
}

/**
 * The public error for a body that could not be read (HttpApiBuilder turns the failure of
 * `request.json` into a defect: a `RequestError` whose cause says why).
 */
export const bodyRejectionOf = (defect: unknown): InvalidRequest | PayloadTooLarge => {
  const cause = HttpServerError.isServerError(defect) && defect._tag === "RequestError" ? defect.cause : undefined
  if (!(cause instanceof RequestBodyRejected)) return new InvalidRequest({ message: rejectionMessages.NotJson })
  return cause.reason === "TooLarge"
    ? payloadTooLarge(cause.limit)
    : new InvalidRequest({ message: rejectionMessages[cause.reason] })
}

/** `application/json`, with no charset or UTF-8. */
export const isJsonMediaType = (header: string | undefined): boolean => {
  if (header === undefined) return false
  const [type = "", ...parameters] = header.split(";")
  if (type.trim().toLowerCase() !== "application/json") return false
  return parameters.every((parameter) => {
    const [name = "", value = ""] = parameter.split("=")
    if (name.trim().toLowerCase() !== "charset") return true
    const charset = value.trim().replace(/^"(.*)"$/, "$1").toLowerCase()
    return charset === "utf-8" || charset === "utf8"
  })
}

const carriesBody = (source: IncomingMessage): boolean =>
  source.headers["transfer-encoding"] !== undefined || Number(source.headers["content-length"] ?? "0") > 0

/** Reads the whole body, failing (and pausing the stream) as soon as it passes `limit` bytes. */
const readBounded = (source: IncomingMessage, limit: number) =>
  Effect.async<Uint8Array, RequestBodyRejected>((resume) => {
    if (source.readableEnded) {
      resume(Effect.fail(new RequestBodyRejected({ reason: "Unreadable", limit })))
      return
    }
    const chunks: Array<Buffer> = []
    let size = 0
    const stop = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
    }
    function onData(chunk: unknown) {
      const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk))
      size += bytes.length
      if (size > limit) {
        stop()
        source.pause()
        chunks.length = 0
        resume(Effect.fail(new RequestBodyRejected({ reason: "TooLarge", limit })))
        return
      }
      chunks.push(bytes)
    }
    function onEnd() {
      stop()
      resume(Effect.succeed(Buffer.concat(chunks, size)))
    }
    function onError() {
      stop()
      resume(Effect.fail(new RequestBodyRejected({ reason: "Unreadable", limit })))
    }
    source.on("data", onData)
    source.on("end", onEnd)
    source.on("error", onError)
    return Effect.sync(() => {
      stop()
      source.pause()
    })
  })

/** Counts `[` and `{` outside strings: refuses deep nesting before the parser (or anything after it) recurses. */
const nestsDeeperThan = (text: string, max: number): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return false
}

/** In a `u` regular expression a well-formed pair is one code point; only a lone surrogate is `Cs`. */
const loneSurrogate = /\p{Cs}/u

const holdsLoneSurrogate = (value: unknown): boolean => {
  if (typeof value === "string") return loneSurrogate.test(value)
  if (Array.isArray(value)) return value.some(holdsLoneSurrogate)
  if (typeof value === "object" && value !== null) {
    return Object.entries(value).some(([key, child]) => loneSurrogate.test(key) || holdsLoneSurrogate(child))
  }
  return false
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

const decodeText = (bytes: Uint8Array, limit: number) =>
  Effect.try({ try: () => utf8.decode(bytes), catch: () => new RequestBodyRejected({ reason: "NotUtf8", limit }) })

const parseJson = (text: string, limit: number) =>
  Effect.gen(function*() {
    if (text === "") return null
    if (nestsDeeperThan(text, maxJsonDepth)) {
      return yield* Effect.fail(new RequestBodyRejected({ reason: "TooDeep", limit }))
    }
    const value: unknown = yield* Effect.try({
      try: () => JSON.parse(text),
      catch: () => new RequestBodyRejected({ reason: "NotJson", limit })
    })
    if (holdsLoneSurrogate(value)) return yield* Effect.fail(new RequestBodyRejected({ reason: "NotUnicode", limit }))
    return value
  })

/**
 * The request as the router and handlers see it: everything from the server's request, except
 * that its body comes from the bounded read (done once, on first use, after authentication).
 */
class BoundedBodyRequest extends Inspectable.Class implements HttpServerRequest.HttpServerRequest {
  readonly [HttpServerRequest.TypeId]: HttpServerRequest.TypeId = HttpServerRequest.TypeId
  readonly [HttpIncomingMessage.TypeId]: HttpIncomingMessage.TypeId = HttpIncomingMessage.TypeId

  constructor(
    private readonly original: HttpServerRequest.HttpServerRequest,
    private readonly body: Effect.Effect<Uint8Array, RequestBodyRejected>,
    private readonly limit: number
  ) {
    super()
  }

  private readonly failure = (cause: RequestBodyRejected): HttpServerError.RequestError =>
    new HttpServerError.RequestError({ request: this, reason: "Decode", cause })

  get source() {
    return this.original.source
  }
  get url() {
    return this.original.url
  }
  get originalUrl() {
    return this.original.originalUrl
  }
  get method() {
    return this.original.method
  }
  get cookies() {
    return this.original.cookies
  }
  get headers() {
    return this.original.headers
  }
  get remoteAddress() {
    return this.original.remoteAddress
  }
  get upgrade() {
    return this.original.upgrade
  }
  modify(options: Parameters<HttpServerRequest.HttpServerRequest["modify"]>[0]): HttpServerRequest.HttpServerRequest {
    return new BoundedBodyRequest(this.original.modify(options), this.body, this.limit)
  }

  get arrayBuffer(): Effect.Effect<ArrayBuffer, HttpServerError.RequestError> {
    return Effect.mapError(
      Effect.map(this.body, (bytes) => {
        const copy = new Uint8Array(bytes.byteLength)
        copy.set(bytes)
        return copy.buffer
      }),
      this.failure
    )
  }
  get text(): Effect.Effect<string, HttpServerError.RequestError> {
    return Effect.mapError(Effect.flatMap(this.body, (bytes) => decodeText(bytes, this.limit)), this.failure)
  }
  get json(): Effect.Effect<unknown, HttpServerError.RequestError> {
    return Effect.mapError(
      Effect.flatMap(
        Effect.flatMap(this.body, (bytes) => decodeText(bytes, this.limit)),
        (text) => parseJson(text, this.limit)
      ),
      this.failure
    )
  }
  get urlParamsBody(): Effect.Effect<UrlParams.UrlParams, HttpServerError.RequestError> {
    return Effect.map(this.text, (text) => UrlParams.fromInput(new URLSearchParams(text)))
  }
  get stream(): Stream.Stream<Uint8Array, HttpServerError.RequestError> {
    return Stream.fromEffect(Effect.mapError(this.body, this.failure))
  }
  get multipart() {
    return Effect.fail(new Multipart.MultipartError({ reason: "Parse", cause: "multipart bodies are not accepted" }))
  }
  get multipartStream() {
    return Stream.fail(new Multipart.MultipartError({ reason: "Parse", cause: "multipart bodies are not accepted" }))
  }

  toJSON(): unknown {
    return { _id: "BoundedBodyRequest", method: this.method, url: this.originalUrl }
  }
}

/**
 * API middleware: refuses an oversized declared length (413) or a body that is not JSON (415)
 * before reading anything, and hands the rest a request whose body is read with the limit.
 * Only Node requests are guarded (the only server this API runs on).
 */
export const requestBodyGuard = (maxBodyBytes: number) => <E, R>(app: HttpApp.Default<E, R>) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const source = request.source
    if (!(source instanceof IncomingMessage) || !carriesBody(source)) return yield* app
    const declared = source.headers["content-length"]
    if (declared !== undefined && Number(declared) > maxBodyBytes) {
      return yield* Effect.fail(payloadTooLarge(maxBodyBytes))
    }
    if (!isJsonMediaType(source.headers["content-type"])) return yield* Effect.fail(unsupportedMediaType())
    const body = yield* Effect.cached(readBounded(source, maxBodyBytes))
    return yield* Effect.provideService(
      app,
      HttpServerRequest.HttpServerRequest,
      new BoundedBodyRequest(request, body, maxBodyBytes)
    )
  })

/**
 * After an answer sent before the body was read whole, the most of the rest that is read and
 * thrown away, and for how long. Closing a socket with unread bytes makes the kernel reset the
 * connection, and a client still sending then sees the reset instead of the answer (seen for up
 * to 9 % of oversized requests under load): reading on a while lets it finish and read the answer.
 */
export const lingerLimits = { bytes: 8 * 1_048_576, millis: 2_000 } as const

/** Reads and discards the rest of `source`'s body: true when it ended within the limits. */
const discardRest = (source: IncomingMessage) =>
  Effect.async<boolean>((resume) => {
    if (source.complete) return resume(Effect.succeed(true))
    let discarded = 0
    const stop = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
    }
    const finish = (ended: boolean) => {
      stop()
      resume(Effect.succeed(ended))
    }
    function onData(chunk: unknown) {
      discarded += Buffer.isBuffer(chunk) ? chunk.length : String(chunk).length
      if (discarded > lingerLimits.bytes) finish(false)
    }
    function onEnd() {
      finish(true)
    }
    function onError() {
      finish(false)
    }
    source.on("data", onData)
    source.on("end", onEnd)
    source.on("error", onError)
    source.resume()
    return Effect.sync(stop)
  }).pipe(
    Effect.timeoutTo({ duration: lingerLimits.millis, onTimeout: () => false, onSuccess: (ended) => ended }),
    // The rest never came, or too much of it: now the connection goes.
    Effect.flatMap((ended) => (ended ? Effect.void : Effect.sync(() => source.socket.destroy())))
  )

/**
 * Answering before the body was read whole: a declared length beyond what lingering reads gets
 * `Connection: close` (the client learns from the head not to send it); otherwise the rest is
 * discarded in the background within `lingerLimits`, and a body that does not end within them is
 * cut off after the client had time to read the answer.
 */
export const lingerWhenBodyUnread = HttpMiddleware.make((app) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const source = request.source
    // A request without a body has nothing to linger over: no handler for it at all.
    if (!(source instanceof IncomingMessage) || !carriesBody(source)) return app
    return Effect.zipRight(
      HttpApp.appendPreResponseHandler((_request, response) => {
        if (source.complete) return Effect.succeed(response)
        const declared = Number(source.headers["content-length"] ?? "0")
        if (declared > lingerLimits.bytes) {
          return Effect.succeed(HttpServerResponse.setHeader(response, "connection", "close"))
        }
        return Effect.as(Effect.forkDaemon(discardRest(source)), response)
      }),
      app
    )
  })
)

const isEmptyObject = (value: unknown): boolean =>
  typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).length === 0

/** No body, or `{}`: anything else names no field the route takes (an unreadable body is mapped like any other). */
const bodyWithoutFields = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const body = yield* Effect.orDie(request.json)
  if (body !== null && !isEmptyObject(body)) {
    return yield* Effect.fail(new InvalidRequest({ message: "body: this route takes no fields; send no body, or {}" }))
  }
})

/**
 * For a handler whose route takes nothing in its body (described so in OpenAPI): no body or an
 * empty JSON object (what many clients send with a POST) passes, anything else is 400. Run in
 * the handler, after authentication, so nobody unauthenticated gets a body read.
 */
export const withoutRequestBody = <A, E, R>(handler: Effect.Effect<A, E, R>) =>
  Effect.zipRight(bodyWithoutFields, handler)
