import { sha256Hex } from "./CanonicalJson.js"

/**
 * A stable UUID-shaped id derived from its parts (RFC 9562 v8 layout over SHA-256). A
 * projection that runs again derives the same row ids, so the tables' keys see the repeat.
 */
export const derivedId = (...parts: ReadonlyArray<string>): string => {
  const hex = sha256Hex(parts.join("\u0000"))
  const variant = ((parseInt(hex.slice(16, 17), 16) & 0x3) | 0x8).toString(16)
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${
    hex.slice(20, 32)
  }`
}
