/**
 * Keys the gateway tests use everywhere. Neither may ever appear in a log line, an error or a
 * stored row: the suites capture everything logged and search it for these strings.
 */
export const CANARY_KEY = "sk-canary-5d1f0c9e7b2a4e68a3f1c0d9b8e7a6f5"
/** A second key the fake provider rejects (and echoes back in its 401 text). */
export const WRONG_CANARY_KEY = "sk-wrongcanary-0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d"
