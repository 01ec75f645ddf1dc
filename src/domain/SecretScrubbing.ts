/**
 * Removes what looks like a credential from text that is about to be stored or logged for
 * operators (`internal_error_message`): API keys (`sk-...`), bearer tokens, JWTs, long base64
 * or hex runs, and any secret the caller names (the key a call used), whatever its shape.
 */

const redacted = "[redacted]"

const tokenLike: ReadonlyArray<RegExp> = [
  /\bBearer\s+\S+/gi,
  /\bsk-[A-Za-z0-9_-]{6,}/g,
  /\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]*)?/g,
  /\b[0-9a-fA-F]{32,}\b/g,
  /[A-Za-z0-9+/_-]{32,}={0,2}/g
]

/** Job, credential and event ids are UUIDs: operators need them, and they are no secret. */
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
/**
 * Words joined by `_`, `-`, `/` or `.` in lower case (`invalid_request_error/model_not_found`):
 * a provider's error type and code, which operators need; keys and tokens mix in digits or capitals.
 */
const lowercaseWords = /^[a-z]+(?:[_/.-][a-z]+)*$/

const kept = (match: string) => uuid.test(match) || lowercaseWords.test(match)

export const scrubSecrets = (text: string, secrets: ReadonlyArray<string> = []): string => {
  let scrubbed = text
  for (const secret of secrets) {
    if (secret.length > 0) scrubbed = scrubbed.split(secret).join(redacted)
  }
  for (const pattern of tokenLike) scrubbed = scrubbed.replace(pattern, (match) => (kept(match) ? match : redacted))
  return scrubbed
}
