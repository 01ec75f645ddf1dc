import { Clock, Effect, Random } from "effect"

const hex = (value: number, width: number): string => value.toString(16).padStart(width, "0")

/**
 * A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits. Time-ordered ids keep
 * the primary-key index append-only and give newest-first lists a stable tiebreak. Time and
 * randomness come from Effect's Clock and Random, so a seeded simulation makes the same ids.
 */
export const newId: Effect.Effect<string> = Effect.gen(function*() {
  const millis = yield* Clock.currentTimeMillis
  const word = Random.nextIntBetween(0, 0x10000)
  const a = yield* word
  const b = yield* word
  const c = yield* word
  const d = yield* word
  const e = yield* word
  const timeHex = hex(millis, 12).slice(-12)
  const randA = hex(a & 0x0fff, 3)
  const variant = hex((b & 0x3fff) | 0x8000, 4)
  const randRest = hex(c, 4) + hex(d, 4) + hex(e, 4)
  return `${timeHex.slice(0, 8)}-${timeHex.slice(8)}-7${randA}-${variant}-${randRest}`
})
