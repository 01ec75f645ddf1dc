import { Clock, Effect, Random } from "effect"

const hex = (value: number, width: number): string => value.toString(16).padStart(width, "0")

/** The random 16-bit words one id takes. */
const wordsPerId = 5

/** A UUIDv7 from its milliseconds and its five random words (see `newId`). */
const uuidV7 = (millis: number, a: number, b: number, c: number, d: number, e: number): string => {
  const timeHex = hex(millis, 12).slice(-12)
  const randA = hex(a & 0x0fff, 3)
  const variant = hex((b & 0x3fff) | 0x8000, 4)
  const randRest = hex(c, 4) + hex(d, 4) + hex(e, 4)
  return `${timeHex.slice(0, 8)}-${timeHex.slice(8)}-7${randA}-${variant}-${randRest}`
}

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
  return uuidV7(millis, a, b, c, d, e)
})

/**
 * `count` ids at once (a batch's): the same random words, in the same order, as `newId` drawn
 * `count` times, under one clock reading, without a generator per id.
 */
export const newIds = (count: number): Effect.Effect<ReadonlyArray<string>> =>
  Effect.flatMap(Clock.currentTimeMillis, (millis) =>
    Effect.randomWith((random) =>
      Effect.map(
        Effect.replicateEffect(random.nextIntBetween(0, 0x10000), count * wordsPerId),
        (words) =>
          Array.from({ length: count }, (_, id) => {
            const at = id * wordsPerId
            return uuidV7(millis, words[at]!, words[at + 1]!, words[at + 2]!, words[at + 3]!, words[at + 4]!)
          })
      )
    ))
