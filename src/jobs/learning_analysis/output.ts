import { Schema } from "effect"
import { maxChars, minChars } from "../../domain/TextLength.js"

const Point = Schema.String.pipe(minChars(1), maxChars(1_000))

/**
 * `{ summary, strengths: string[], gaps: string[], nextSteps: string[] }`: what the learner does
 * well, what is missing or wrong across the evaluations, and an ordered plan of 1..10 steps.
 */
export const LearningAnalysisOutput = Schema.Struct({
  summary: Schema.String.pipe(minChars(1), maxChars(4_000)),
  strengths: Schema.Array(Point).pipe(Schema.maxItems(20)),
  gaps: Schema.Array(Point).pipe(Schema.maxItems(20)),
  nextSteps: Schema.Array(Point).pipe(Schema.minItems(1), Schema.maxItems(10))
})
export type LearningAnalysisOutput = typeof LearningAnalysisOutput.Type
