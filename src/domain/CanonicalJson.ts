import { createHash } from "node:crypto"

/**
 * Canonical JSON: object keys sorted recursively, no whitespace. The spec's
 * `JSON.stringify(v, Object.keys(v).sort())` treats the key list as an allow-list at every
 * depth, dropping nested fields (docs/architecture.md §19.1); this keeps every field.
 */
export const canonicalJson = (value: unknown): string => JSON.stringify(canonicalize(value))

const canonicalize = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(canonicalize)
  if (value !== null && typeof value === "object") {
    if (value instanceof Date) return value.toISOString()
    // A view, not a copy: this runs on every create (the request hash) and every success (the output hash).
    const fields = value as Readonly<Record<string, unknown>>
    const sorted: Record<string, unknown> = {}
    // The default sort of strings is by UTF-16 code units; JSON.stringify drops undefined fields.
    for (const key of Object.keys(fields).sort()) sorted[key] = canonicalize(fields[key])
    return sorted
  }
  return value
}

export const sha256Hex = (text: string): string => createHash("sha256").update(text).digest("hex")

/**
 * What an idempotency key binds: the job type and the canonical JSON of its validated input.
 * The same key with another request is refused rather than answered with the first job.
 */
export const requestHash = (jobType: string, validatedInput: unknown): string =>
  sha256Hex(canonicalJson({ jobType, input: validatedInput }))

/** Stored on the job and compared to spot a duplicate projection. */
export const outputHash = (validatedOutput: unknown): string => sha256Hex(canonicalJson(validatedOutput))
