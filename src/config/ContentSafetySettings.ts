import { Config, ConfigError, Context, Either, Layer } from "effect"

export interface ContentSafetyRules {
  /**
   * Matched anywhere in a string, on the `textSkeletons` of both term and string: NFKC, invisible
   * characters removed, Unicode TR39 confusables mapped, case folded.
   */
  readonly blockedTerms: ReadonlyArray<string>
  /**
   * Regular expressions (source text, `iu` flags), matched on the string as sent, on its
   * `foldedText`, and (with their literal characters skeletonised) on its `textSkeletons`.
   */
  readonly blockedPatterns: ReadonlyArray<string>
}

const listOf = (value: string, separator: RegExp) =>
  value.split(separator).map((s) => s.trim()).filter((s) => s.length > 0)

const compiles = (pattern: string): boolean => {
  try {
    new RegExp(pattern, "iu")
    return true
  } catch {
    return false
  }
}

/**
 * The content safety rules. `CONTENT_SAFETY_BLOCKED_TERMS`: comma-separated terms.
 * `CONTENT_SAFETY_BLOCKED_PATTERNS`: a JSON array of regular expressions, or one per line. Both
 * optional (no rules: everything passes).
 */
export class ContentSafetySettings
  extends Context.Tag("ai-job-engine/ContentSafetySettings")<ContentSafetySettings, ContentSafetyRules>()
{
  static readonly defaults: ContentSafetyRules = { blockedTerms: [], blockedPatterns: [] }
  static readonly config = Config.all({
    blockedTerms: Config.string("CONTENT_SAFETY_BLOCKED_TERMS").pipe(
      Config.withDefault(""),
      Config.map((v) => listOf(v, /,/))
    ),
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
            return Either.left(
              ConfigError.InvalidData([], "CONTENT_SAFETY_BLOCKED_PATTERNS must be a JSON array of strings")
            )
          }
          patterns = parsed
        } else {
          patterns = listOf(trimmed, /\n/)
        }
        const bad = patterns.findIndex((p) => !compiles(p))
        return bad >= 0
          ? Either.left(
            ConfigError.InvalidData(
              [],
              `CONTENT_SAFETY_BLOCKED_PATTERNS: pattern #${bad + 1} is not a valid regular expression`
            )
          )
          : Either.right(patterns)
      })
    )
  })
  static readonly layer = Layer.effect(ContentSafetySettings, ContentSafetySettings.config)
}
