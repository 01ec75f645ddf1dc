import addFormats from "ajv-formats"
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js"
import { Either, Schema } from "effect"
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, Server, ServerResponse } from "node:http"

/**
 * Every answer an HTTP test server sends, checked against the `/openapi.json` that server serves,
 * by a validator this project does not write (Ajv over the served document): the status is one
 * the operation declares, the content type is one it declares for that status, a JSON body
 * matches its schema, a body is absent where none is declared, and every declared header that
 * is required is there and matches its schema. A request that matches no documented path must
 * get the document's `RouteNotFound` response, and a documented path asked with a method it
 * does not have, `MethodNotAllowed` with an `Allow` header naming exactly the path's methods.
 *
 * The check sits on the Node server itself (a tap on `writeHead`/`write`/`end`), so it sees
 * every answer whatever client a test uses: `fetch`, the typed client, raw sockets, a browser.
 * A CORS preflight (OPTIONS with `Access-Control-Request-Method`) is outside OpenAPI's reach and
 * is not checked; what Node itself writes on a socket (408 on a stalled request) never passes
 * through a response object and is not seen.
 */

/** One answer as the server sent it. */
export interface Exchange {
  readonly method: string
  readonly url: string
  readonly requestHeaders: IncomingHttpHeaders
  readonly status: number
  /** Lower-cased names. */
  readonly headers: Readonly<Record<string, string>>
  /** Undefined when the answer was cut off (the client went away) or too large to keep. */
  readonly body: Buffer | undefined
}

// ---------------------------------------------------------------------------------------------
// The parts of an OpenAPI 3.1 document the check reads.

const HeaderObject = Schema.Struct({
  required: Schema.optional(Schema.Boolean),
  schema: Schema.optional(Schema.Unknown)
})
const ResponseObject = Schema.Struct({
  content: Schema.optional(
    Schema.Record({ key: Schema.String, value: Schema.Struct({ schema: Schema.optional(Schema.Unknown) }) })
  ),
  headers: Schema.optional(Schema.Record({ key: Schema.String, value: HeaderObject }))
})
type ResponseObject = typeof ResponseObject.Type
const Operation = Schema.Struct({ responses: Schema.Record({ key: Schema.String, value: ResponseObject }) })
const OpenApiDocument = Schema.Struct({
  openapi: Schema.String,
  paths: Schema.Record({ key: Schema.String, value: Schema.Record({ key: Schema.String, value: Schema.Unknown }) }),
  components: Schema.Struct({
    responses: Schema.Struct({ RouteNotFound: ResponseObject, MethodNotAllowed: ResponseObject })
  })
})

const httpMethods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const
const decodeOperation = Schema.decodeUnknownEither(Operation)

interface DocumentedPath {
  readonly template: string
  readonly pattern: RegExp
  readonly parameters: number
  readonly operations: ReadonlyMap<string, { readonly pointer: string; readonly operation: typeof Operation.Type }>
}

/** JSON Pointer escaping (RFC 6901), for `$ref`s into the document. */
const escapePointer = (segment: string) => segment.replaceAll("~", "~0").replaceAll("/", "~1")

const templatePattern = (template: string) =>
  new RegExp(
    "^" + template.split(/\{[^}]+\}/).map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("[^/]+") + "$"
  )

const mediaTypeOf = (contentType: string) => (contentType.split(";")[0] ?? "").trim().toLowerCase()

export interface ResponseValidator {
  /** What is wrong with this answer; empty when it matches the document. */
  readonly check: (exchange: Exchange) => ReadonlyArray<string>
}

const documentId = "urn:ai-job-engine:openapi"

const buildValidator = (text: string): ResponseValidator => {
  const raw: unknown = JSON.parse(text)
  const document = Schema.decodeUnknownSync(OpenApiDocument)(raw)
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false })
  addFormats(ajv)
  if (typeof raw !== "object" || raw === null) throw new Error("/openapi.json is not a JSON object")
  ajv.addSchema(raw, documentId)
  const compiled = new Map<string, ValidateFunction>()
  const validatorAt = (pointer: string): ValidateFunction => {
    const known = compiled.get(pointer)
    if (known !== undefined) return known
    const validate = ajv.compile({ $ref: `${documentId}#${pointer}` })
    compiled.set(pointer, validate)
    return validate
  }

  const paths: ReadonlyArray<DocumentedPath> = Object.entries(document.paths)
    .map(([template, item]) => {
      const operations = new Map<string, { readonly pointer: string; readonly operation: typeof Operation.Type }>()
      for (const method of httpMethods) {
        if (item[method] === undefined) continue
        const operation = decodeOperation(item[method])
        if (Either.isLeft(operation)) throw new Error(`${method} ${template}: not an operation the check can read`)
        operations.set(method.toUpperCase(), {
          pointer: `/paths/${escapePointer(template)}/${method}`,
          operation: operation.right
        })
      }
      return {
        template,
        pattern: templatePattern(template),
        parameters: (template.match(/\{/g) ?? []).length,
        operations
      }
    })
    // A concrete path wins over a templated one (OpenAPI's matching rule).
    .sort((a, b) => a.parameters - b.parameters)

  const headerValue = (value: string, schema: unknown): unknown => {
    const type = typeof schema === "object" && schema !== null && "type" in schema ? schema.type : undefined
    return (type === "integer" || type === "number") && /^-?\d+(\.\d+)?$/.test(value) ? Number(value) : value
  }

  const checkResponse = (exchange: Exchange, response: ResponseObject, pointer: string): ReadonlyArray<string> => {
    const problems: Array<string> = []
    for (const [name, header] of Object.entries(response.headers ?? {})) {
      const value = exchange.headers[name.toLowerCase()]
      if (value === undefined) {
        if (header.required === true) problems.push(`header ${name} is required and missing`)
        continue
      }
      const validate = validatorAt(`${pointer}/headers/${escapePointer(name)}/schema`)
      if (!validate(headerValue(value, header.schema))) {
        problems.push(`header ${name}: ${ajv.errorsText(validate.errors)}`)
      }
    }
    const content = response.content ?? {}
    const declared = Object.keys(content)
    const contentType = exchange.headers["content-type"]
    const hasBody = exchange.body !== undefined && exchange.body.length > 0
    if (declared.length === 0) {
      if (hasBody) problems.push(`a body where the document declares none (${contentType ?? "no content type"})`)
      return problems
    }
    if (exchange.method === "HEAD") return problems
    if (contentType === undefined) return [...problems, `no content type; the document declares ${declared.join(", ")}`]
    const mediaType = declared.find((key) => mediaTypeOf(key) === mediaTypeOf(contentType))
    if (mediaType === undefined) {
      return [...problems, `content type ${contentType}; the document declares ${declared.join(", ")}`]
    }
    if (exchange.body === undefined) return problems
    const text = exchange.body.toString("utf8")
    let value: unknown = text
    if (mediaTypeOf(mediaType) === "application/json") {
      try {
        value = JSON.parse(text)
      } catch {
        return [...problems, "the body is not JSON"]
      }
    }
    const validate = validatorAt(`${pointer}/content/${escapePointer(mediaType)}/schema`)
    if (!validate(value)) problems.push(`body: ${ajv.errorsText(validate.errors)}`)
    return problems
  }

  const check = (exchange: Exchange): ReadonlyArray<string> => {
    const method = exchange.method.toUpperCase()
    if (method === "OPTIONS" && exchange.requestHeaders["access-control-request-method"] !== undefined) return []
    const pathname = exchange.url.split("?")[0] ?? ""
    const documented = paths.find((path) => path.pattern.test(pathname))
    if (documented === undefined) {
      if (exchange.status !== 404) {
        return [`status ${exchange.status} for a path the document does not have (expected 404)`]
      }
      return checkResponse(exchange, document.components.responses.RouteNotFound, "/components/responses/RouteNotFound")
    }
    const found = documented.operations.get(method === "HEAD" ? "GET" : method)
    if (found === undefined) {
      if (exchange.status !== 405) {
        return [`status ${exchange.status} for a method ${documented.template} does not have (expected 405)`]
      }
      // HEAD is served wherever GET is.
      const methods = [...documented.operations.keys()]
      const allowed = (methods.includes("GET") ? [...methods, "HEAD"] : methods).sort().join(", ")
      const allow = (exchange.headers["allow"] ?? "").split(",").map((m) => m.trim()).filter((m) => m !== "").sort()
        .join(", ")
      const problems = checkResponse(
        exchange,
        document.components.responses.MethodNotAllowed,
        "/components/responses/MethodNotAllowed"
      )
      return allow === allowed ? problems : [...problems, `Allow: ${allow}; the document has ${allowed}`]
    }
    const status = String(exchange.status)
    const response = found.operation.responses[status]
    if (response !== undefined) return checkResponse(exchange, response, `${found.pointer}/responses/${status}`)
    const fallback = found.operation.responses["default"]
    if (fallback !== undefined) return checkResponse(exchange, fallback, `${found.pointer}/responses/default`)
    return [`status ${status} is not declared (declared: ${Object.keys(found.operation.responses).join(", ")})`]
  }

  return { check }
}

/** One validator per document text: every server of a test file serves the same one. */
const validators = new Map<string, ResponseValidator>()

export const responseValidatorFor = (documentText: string): ResponseValidator => {
  const known = validators.get(documentText)
  if (known !== undefined) return known
  const made = buildValidator(documentText)
  validators.set(documentText, made)
  return made
}

// ---------------------------------------------------------------------------------------------
// The tap on a Node server

/** Bodies above this are not kept (nothing the API answers comes near it). */
const maxKeptBody = 8 * 1024 * 1024

const headerRecord = (headers: OutgoingHttpHeaders): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue
    out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : String(value)
  }
  return out
}

/** The headers `writeHead` was given: an object, or a flat `[name, value, ...]` list. */
const givenHeaders = (args: ReadonlyArray<unknown>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const arg of args) {
    if (Array.isArray(arg)) {
      for (let i = 0; i + 1 < arg.length; i += 2) out[String(arg[i]).toLowerCase()] = String(arg[i + 1])
    } else if (typeof arg === "object" && arg !== null) {
      for (const [name, value] of Object.entries(arg)) {
        if (value !== undefined) out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : String(value)
      }
    }
  }
  return out
}

const chunkBytes = (chunk: unknown): Buffer | undefined => {
  if (Buffer.isBuffer(chunk)) return chunk
  if (chunk instanceof Uint8Array) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
  if (typeof chunk === "string") return Buffer.from(chunk, "utf8")
  return undefined
}

/**
 * Calls `onExchange` with every answer `server` finishes (or abandons), before anything else
 * sees the request: the tap is the first `request` listener.
 */
export const tapResponses = (server: Server, onExchange: (exchange: Exchange) => void): Server =>
  server.prependListener("request", (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Array<Buffer> = []
    let size = 0
    let headers: Record<string, string> = {}
    const keep = (chunk: unknown) => {
      const bytes = chunkBytes(chunk)
      if (bytes === undefined) return
      size += bytes.length
      if (size <= maxKeptBody) chunks.push(bytes)
    }
    response.writeHead = new Proxy(response.writeHead, {
      apply(target, self: ServerResponse, args: Array<unknown>) {
        const result = Reflect.apply(target, self, args)
        headers = { ...headerRecord(self.getHeaders()), ...givenHeaders(args.slice(1)) }
        return result
      }
    })
    response.write = new Proxy(response.write, {
      apply(target, self: ServerResponse, args: Array<unknown>) {
        keep(args[0])
        return Reflect.apply(target, self, args)
      }
    })
    response.end = new Proxy(response.end, {
      apply(target, self: ServerResponse, args: Array<unknown>) {
        keep(args[0])
        return Reflect.apply(target, self, args)
      }
    })
    response.once("close", () => {
      // Never answered: the client went away before the server wrote a status.
      if (!response.headersSent) return
      onExchange({
        method: request.method ?? "GET",
        url: request.url ?? "/",
        requestHeaders: request.headers,
        status: response.statusCode,
        headers: Object.keys(headers).length > 0 ? headers : headerRecord(response.getHeaders()),
        body: response.writableFinished && size <= maxKeptBody ? Buffer.concat(chunks, size) : undefined
      })
    })
  })

// ---------------------------------------------------------------------------------------------
// Parameters, as a client reading the document would send them

/**
 * Whether the served document accepts `value` for a query (or path, header) parameter: the
 * text is read as its schema's type (`coerceTypes`, as OpenAPI validators read query strings)
 * and checked by Ajv with the formats.
 */
export const describedParameter = (documentText: string, path: string, method: string, name: string) => {
  const raw: unknown = JSON.parse(documentText)
  if (typeof raw !== "object" || raw === null) throw new Error("/openapi.json is not a JSON object")
  const document = Schema.decodeUnknownSync(Schema.Struct({ paths: OpenApiDocument.fields.paths }))(raw)
  const parameters = Schema.decodeUnknownSync(
    Schema.Struct({ parameters: Schema.Array(Schema.Struct({ name: Schema.String, schema: Schema.Unknown })) })
  )(document.paths[path]?.[method])
  const index = parameters.parameters.findIndex((parameter) => parameter.name === name)
  if (index < 0) throw new Error(`${method} ${path} has no parameter ${name}`)
  const ajv = new Ajv2020({ strict: false, coerceTypes: true, validateSchema: false })
  addFormats(ajv)
  ajv.addSchema(raw, documentId)
  const validate = ajv.compile({
    $ref: `${documentId}#/paths/${escapePointer(path)}/${method}/parameters/${index}/schema`
  })
  return (value: string): boolean => validate(value)
}
