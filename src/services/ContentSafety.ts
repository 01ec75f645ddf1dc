import { Context, type Effect } from "effect"
import type { ContentSafetyError } from "../domain/ExecutionError.js"

/**
 * ADR 9 ContentSafetyService: checks a job's input before the provider call and its output
 * after it, when the definition's `security.contentSafetyCheck` asks. `content` is any JSON
 * value; every string in it is checked. A block is `CONTENT_SAFETY_BLOCKED`, never retried.
 * The error names the rule that matched, never the content. A rule matches what a reader would
 * see: invisible characters, look-alike letters (Unicode TR39 confusables) and case must not hide
 * a blocked term from it.
 */
export class ContentSafety extends Context.Tag("ai-job-engine/ContentSafety")<
  ContentSafety,
  {
    readonly check: (request: {
      readonly stage: "input" | "output"
      readonly jobType: string
      readonly content: unknown
    }) => Effect.Effect<void, ContentSafetyError>
  }
>() {}
