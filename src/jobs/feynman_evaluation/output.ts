import { Schema } from "effect"
import { maxChars, minChars } from "../../domain/TextLength.js"

/** `{ score: 0..100, feedback, gaps: string[] }` */
export const FeynmanEvaluationOutput = Schema.Struct({
  score: Schema.Int.pipe(Schema.between(0, 100)),
  feedback: Schema.String.pipe(minChars(1), maxChars(10_000)),
  gaps: Schema.Array(Schema.String.pipe(maxChars(1_000))).pipe(Schema.maxItems(50))
})
export type FeynmanEvaluationOutput = typeof FeynmanEvaluationOutput.Type
