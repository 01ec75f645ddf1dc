import { Schema } from "effect"

/** `{ score: 0..100, feedback, gaps: string[] }` */
export const FeynmanEvaluationOutput = Schema.Struct({
  score: Schema.Int.pipe(Schema.between(0, 100)),
  feedback: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(10_000)),
  gaps: Schema.Array(Schema.String.pipe(Schema.maxLength(1_000))).pipe(Schema.maxItems(50))
})
export type FeynmanEvaluationOutput = typeof FeynmanEvaluationOutput.Type
