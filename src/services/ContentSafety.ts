import { Effect, Either, Layer } from "effect"
import { type ContentSafetyRules, ContentSafetySettings } from "../config/ContentSafetySettings.js"
import { ContentSafetyError } from "../domain/ExecutionError.js"
import { foldedText, skeletonPatternSource, type TextSkeletons, textSkeletons } from "../domain/textSkeleton.js"

/** One pattern as written, and its skeleton forms (absent when one does not compile). */
interface CompiledPattern {
  readonly written: RegExp
  readonly upper: RegExp | undefined
  readonly lower: RegExp | undefined
}

const skeletonForms = ["upper", "lower"] as const

const containsTerm = (term: TextSkeletons, text: TextSkeletons) =>
  skeletonForms.some((form) => term[form].length > 0 && text[form].includes(term[form]))

/** Every string in a JSON value (keys included), depth first. */
const stringsOf = (value: unknown, out: Array<string> = [], depth = 0): Array<string> => {
  if (depth > 64) return out
  if (typeof value === "string") out.push(value)
  else if (Array.isArray(value)) { for (const item of value) stringsOf(item, out, depth + 1) }
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

const makeRuleBasedContentSafety = (rules: ContentSafetyRules) =>
  Effect.gen(function*() {
    // Rules are normalised once, here; each string of a check is normalised once.
    const terms = rules.blockedTerms.map(textSkeletons)
    const patterns: Array<CompiledPattern> = []
    for (const source of rules.blockedPatterns) {
      const compiled = compile(source)
      if (Either.isLeft(compiled)) {
        return yield* Effect.dieMessage(
          `content safety: pattern #${patterns.length + 1} is not a valid regular expression`
        )
      }
      patterns.push({
        written: compiled.right,
        upper: Either.getOrUndefined(compile(skeletonPatternSource(source, "upper"))),
        lower: Either.getOrUndefined(compile(skeletonPatternSource(source, "lower")))
      })
    }
    const matchesPattern = (pattern: CompiledPattern, text: string, folded: string, skeletons: TextSkeletons) =>
      pattern.written.test(folded) || pattern.written.test(text) ||
      skeletonForms.some((form) => pattern[form]?.test(skeletons[form]) === true)
    return {
      check: (request: {
        readonly stage: "input" | "output"
        readonly jobType: string
        readonly content: unknown
      }): Effect.Effect<void, ContentSafetyError> =>
        Effect.suspend(() => {
          // No rules (the default): nothing can match, so no string is normalised.
          if (terms.length === 0 && patterns.length === 0) return Effect.void
          const { content, jobType, stage } = request
          for (const text of stringsOf(content)) {
            const skeletons = textSkeletons(text)
            const term = terms.findIndex((t) => containsTerm(t, skeletons))
            const folded = term >= 0 || patterns.length === 0 ? "" : foldedText(text)
            const pattern = term >= 0 ? -1 : patterns.findIndex((p) => matchesPattern(p, text, folded, skeletons))
            if (term >= 0 || pattern >= 0) {
              const rule = term >= 0 ? `blocked term #${term + 1}` : `blocked pattern #${pattern + 1}`
              return Effect.logWarning("content blocked by safety rules").pipe(
                Effect.annotateLogs({ jobType, stage, rule }),
                Effect.zipRight(
                  Effect.fail(
                    new ContentSafetyError({
                      code: "CONTENT_SAFETY_BLOCKED",
                      stage,
                      message: `${stage} of ${jobType} matched ${rule}`
                    })
                  )
                )
              )
            }
          }
          return Effect.void
        })
    }
  })

/**
 * Checks every string of a job's input and output when `security.contentSafetyCheck` asks
 * (docs/architecture.md §14.6). A block is `CONTENT_SAFETY_BLOCKED`, never retried, and names the
 * rule, never the content. Rules match what a reader sees: invisible characters, TR39 look-alikes
 * and case cannot hide a blocked term. A moderation API would be a second layer of this service.
 */
export class ContentSafety extends Effect.Service<ContentSafety>()("ai-job-engine/ContentSafety", {
  effect: Effect.flatMap(ContentSafetySettings, makeRuleBasedContentSafety),
  dependencies: [ContentSafetySettings.layer]
}) {
  static readonly withRules = (rules: ContentSafetyRules): Layer.Layer<ContentSafety> =>
    Layer.effect(ContentSafety, Effect.map(makeRuleBasedContentSafety(rules), ContentSafety.make))
}
