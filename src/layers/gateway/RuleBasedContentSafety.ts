import { Config, ConfigError, Effect, Either, Layer } from "effect"
import { ContentSafetyError } from "../../domain/ExecutionError.js"
import { ContentSafety } from "../../services/ContentSafety.js"

export interface ContentSafetyRules {
  /** Matched case-insensitively, after Unicode NFKC normalisation, anywhere in a string. */
  readonly blockedTerms: ReadonlyArray<string>
  /** Regular expressions (source text, matched with the `iu` flags). */
  readonly blockedPatterns: ReadonlyArray<string>
}

const normalise = (text: string) => text.normalize("NFKC").toLowerCase()

/** Every string in a JSON value (keys included), depth first. */
const stringsOf = (value: unknown, out: Array<string> = [], depth = 0): Array<string> => {
  if (depth > 64) return out
  if (typeof value === "string") out.push(value)
  else if (Array.isArray(value)) for (const item of value) stringsOf(item, out, depth + 1)
  else if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      out.push(key)
      stringsOf(item, out, depth + 1)
    }
  }
  return out
}

const compile = (pattern: string): Either.Either<RegExp, string> => {
  try {
    return Either.right(new RegExp(pattern, "iu"))
  } catch {
    return Either.left(pattern)
  }
}

/**
 * A rule-based ContentSafety: blocked terms and patterns. A moderation API can replace this layer
 * behind the same `ContentSafety` tag. The error names the rule (by index), never the content.
 */
export const makeRuleBasedContentSafety = (rules: ContentSafetyRules) =>
  Effect.gen(function* () {
    const terms = rules.blockedTerms.map(normalise).filter((term) => term.length > 0)
    const patterns: Array<RegExp> = []
    for (const source of rules.blockedPatterns) {
      const compiled = compile(source)
      if (Either.isLeft(compiled)) return yield* Effect.dieMessage(`content safety: pattern #${patterns.length + 1} is not a valid regular expression`)
      patterns.push(compiled.right)
    }
    return ContentSafety.of({
      check: ({ content, jobType, stage }) =>
        Effect.suspend(() => {
          for (const text of stringsOf(content)) {
            const normalised = normalise(text)
            const term = terms.findIndex((t) => normalised.includes(t))
            const pattern = term >= 0 ? -1 : patterns.findIndex((p) => p.test(normalised) || p.test(text))
            if (term >= 0 || pattern >= 0) {
              const rule = term >= 0 ? `blocked term #${term + 1}` : `blocked pattern #${pattern + 1}`
              return Effect.logWarning("content blocked by safety rules").pipe(
                Effect.annotateLogs({ jobType, stage, rule }),
                Effect.zipRight(
                  Effect.fail(new ContentSafetyError({ code: "CONTENT_SAFETY_BLOCKED", stage, message: `${stage} of ${jobType} matched ${rule}` }))
                )
              )
            }
          }
          return Effect.void
        })
    })
  })

const listOf = (value: string, separator: RegExp) => value.split(separator).map((s) => s.trim()).filter((s) => s.length > 0)

/**
 * `CONTENT_SAFETY_BLOCKED_TERMS`: comma-separated terms. `CONTENT_SAFETY_BLOCKED_PATTERNS`: a JSON
 * array of regular expressions, or one per line. Both optional (no rules: everything passes).
 */
export const contentSafetyConfig = Config.all({
  blockedTerms: Config.string("CONTENT_SAFETY_BLOCKED_TERMS").pipe(Config.withDefault(""), Config.map((v) => listOf(v, /,/))),
  blockedPatterns: Config.string("CONTENT_SAFETY_BLOCKED_PATTERNS").pipe(
    Config.withDefault(""),
    Config.mapOrFail((value): Either.Either<ReadonlyArray<string>, ConfigError.ConfigError> => {
      const trimmed = value.trim()
      let patterns: ReadonlyArray<string>
      if (trimmed.startsWith("[")) {
        let parsed: unknown
        try {
          parsed = JSON.parse(trimmed)
        } catch {
          parsed = undefined
        }
        if (!Array.isArray(parsed) || !parsed.every((p): p is string => typeof p === "string")) {
          return Either.left(ConfigError.InvalidData([], "CONTENT_SAFETY_BLOCKED_PATTERNS must be a JSON array of strings"))
        }
        patterns = parsed
      } else {
        patterns = listOf(trimmed, /\n/)
      }
      const bad = patterns.findIndex((p) => Either.isLeft(compile(p)))
      return bad >= 0
        ? Either.left(ConfigError.InvalidData([], `CONTENT_SAFETY_BLOCKED_PATTERNS: pattern #${bad + 1} is not a valid regular expression`))
        : Either.right(patterns)
    })
  )
})

export const RuleBasedContentSafetyLayer = (rules: ContentSafetyRules) => Layer.effect(ContentSafety, makeRuleBasedContentSafety(rules))

export const RuleBasedContentSafetyLive = Layer.effect(
  ContentSafety,
  Effect.flatMap(contentSafetyConfig, makeRuleBasedContentSafety)
)
