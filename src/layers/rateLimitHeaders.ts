/**
 * Until when a provider asks not to be called, from the headers of its 429 or 503 answer: the
 * latest of `Retry-After` (seconds or an HTTP date), `retry-after-ms`, and `x-ratelimit-reset-requests`
 * / `x-ratelimit-reset-tokens` (OpenAI-style durations such as `1s`, `6m0s`, `20ms`, or seconds).
 * Only for a refusal: successful answers carry the reset headers too, and they do not mean "wait".
 */
export const pauseUntilFromHeaders = (
  headers: Readonly<Record<string, string | undefined>>,
  nowMillis: number
): number | undefined => {
  const header = (name: string) => {
    for (const [key, value] of Object.entries(headers)) {
      if (key.toLowerCase() === name && value !== undefined) return value.trim()
    }
    return undefined
  }
  // Every parser answers a non-negative delay or none; only a 400-digit number (Infinity) is left to drop.
  const delays = [
    secondsOrDate(header("retry-after"), nowMillis),
    millis(header("retry-after-ms")),
    resetDelay(header("x-ratelimit-reset-requests"), nowMillis),
    resetDelay(header("x-ratelimit-reset-tokens"), nowMillis)
  ].filter((delay): delay is number => Number.isFinite(delay))
  return delays.length === 0 ? undefined : nowMillis + Math.max(...delays)
}

const number = /^\d+(\.\d+)?$/

/** An empty value is no number and no date: the parsers below refuse it without a check of its own. */
const secondsOrDate = (value: string | undefined, nowMillis: number): number | undefined => {
  if (value === undefined) return undefined
  if (number.test(value)) return Math.round(Number(value) * 1000)
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMillis)
}

const millis = (value: string | undefined): number | undefined =>
  value !== undefined && number.test(value) ? Math.round(Number(value)) : undefined

const unitMillis: Readonly<Record<string, number>> = {
  h: 3_600_000,
  m: 60_000,
  s: 1_000,
  ms: 1,
  us: 0.001,
  "µs": 0.001,
  ns: 0.000001
}

/** `1h2m3.5s`, `20ms`, or a bare number of seconds (epoch seconds when it is clearly a date). */
const resetDelay = (value: string | undefined, nowMillis: number): number | undefined => {
  if (value === undefined) return undefined
  if (number.test(value)) {
    const seconds = Number(value)
    return seconds > 1e9 ? Math.max(0, seconds * 1000 - nowMillis) : Math.round(seconds * 1000)
  }
  if (!/^(\d+(\.\d+)?(h|ms|m|s|us|µs|ns))+$/.test(value)) return secondsOrDate(value, nowMillis)
  let total = 0
  for (const part of value.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/g)) {
    total += Number(part[1]) * (unitMillis[part[2]!] ?? 0)
  }
  return Math.round(total)
}
