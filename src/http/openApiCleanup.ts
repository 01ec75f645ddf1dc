/**
 * `HttpApi.make` declares its own `HttpApiDecodeError` (`{ _tag, issues, message }`, 400) on
 * every route. This API never sends it: the error middleware turns every decode failure into
 * `InvalidRequest` (`{ code: "INVALID_REQUEST", message }`). This transform removes the unused
 * schema from `/openapi.json`, so the document shows the 400 the server really answers.
 */

const decodeErrorRef = "#/components/schemas/HttpApiDecodeError"
const decodeErrorOnlyComponents = ["HttpApiDecodeError", "Issue", "PropertyKey"]

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const mentionsDecodeError = (value: unknown): boolean => isRecord(value) && value["$ref"] === decodeErrorRef

const clean = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(clean)
  if (!isRecord(value)) return value
  const out: Record<string, unknown> = {}
  for (const [key, child] of Object.entries(value)) out[key] = clean(child)
  const anyOf = out["anyOf"]
  if (Array.isArray(anyOf) && anyOf.some(mentionsDecodeError)) {
    const rest = anyOf.filter((entry) => !mentionsDecodeError(entry))
    if (rest.length === 1 && Object.keys(out).length === 1) return rest[0]
    out["anyOf"] = rest
  }
  return out
}

/** Whether any schema other than the decode error's own still refers to `name`. */
const referencedOutside = (spec: Record<string, unknown>, name: string): boolean => {
  const ref = `#/components/schemas/${name}`
  const search = (value: unknown, skip: ReadonlyArray<unknown>): boolean => {
    if (skip.includes(value)) return false
    if (Array.isArray(value)) return value.some((v) => search(v, skip))
    if (!isRecord(value)) return false
    if (value["$ref"] === ref) return true
    return Object.values(value).some((v) => search(v, skip))
  }
  const components = isRecord(spec["components"]) ? spec["components"] : {}
  const schemas = isRecord(components["schemas"]) ? components["schemas"] : {}
  const skip = decodeErrorOnlyComponents.map((n) => schemas[n])
  return search(spec, skip)
}

const refsOf = (schema: unknown): ReadonlyArray<string> => {
  if (!isRecord(schema)) return []
  const ref = schema["$ref"]
  if (typeof ref === "string") return [ref]
  const anyOf = schema["anyOf"]
  return Array.isArray(anyOf) ? anyOf.flatMap(refsOf) : []
}

/** The `code` literal of an error component (`{ code: { enum: [CODE] } }`). */
const codeOf = (schemas: Record<string, unknown>, ref: string): string | undefined => {
  const component = schemas[ref.replace("#/components/schemas/", "")]
  if (!isRecord(component) || !isRecord(component["properties"])) return undefined
  const code = component["properties"]["code"]
  if (!isRecord(code) || !Array.isArray(code["enum"])) return undefined
  const first: unknown = code["enum"][0]
  return typeof first === "string" ? first : undefined
}

/** Each error response says which codes it carries: `JOB_NOT_CANCELLABLE | JOB_ALREADY_CANCELLED`. */
const describeErrorCodes = (spec: Record<string, unknown>): void => {
  const components = isRecord(spec["components"]) ? spec["components"] : {}
  const schemas = isRecord(components["schemas"]) ? components["schemas"] : {}
  const paths = isRecord(spec["paths"]) ? spec["paths"] : {}
  for (const item of Object.values(paths)) {
    if (!isRecord(item)) continue
    for (const operation of Object.values(item)) {
      if (!isRecord(operation) || !isRecord(operation["responses"])) continue
      for (const [status, response] of Object.entries(operation["responses"])) {
        if (Number(status) < 400 || !isRecord(response) || !isRecord(response["content"])) continue
        const json = response["content"]["application/json"]
        if (!isRecord(json)) continue
        const codes = refsOf(json["schema"]).flatMap((ref) => {
          const code = codeOf(schemas, ref)
          return code === undefined ? [] : [code]
        })
        if (codes.length > 0) response["description"] = `Error codes: ${Array.from(new Set(codes)).join(" | ")}`
      }
    }
  }
}

export const withoutDefaultDecodeError = (spec: Record<string, unknown>): Record<string, unknown> => {
  const cleaned = clean(spec)
  if (!isRecord(cleaned)) return spec
  const components = cleaned["components"]
  if (isRecord(components) && isRecord(components["schemas"])) {
    const schemas = { ...components["schemas"] }
    delete schemas["HttpApiDecodeError"]
    for (const name of decodeErrorOnlyComponents) {
      if (name !== "HttpApiDecodeError" && !referencedOutside(cleaned, name)) delete schemas[name]
    }
    cleaned["components"] = { ...components, schemas }
  }
  describeErrorCodes(cleaned)
  return cleaned
}
