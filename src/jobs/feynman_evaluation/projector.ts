import { Option, Schema } from "effect"
import { rowProjector } from "../rowProjector.js"
import { FeynmanEvaluationInput } from "./definition.js"
import { FeynmanEvaluationOutput } from "./output.js"

const conceptOf = (input: unknown) =>
  Option.match(Schema.decodeUnknownOption(FeynmanEvaluationInput)(input), {
    onNone: () => "",
    onSome: (decoded) => decoded.concept
  })

/** One `learning_evaluation` row per job (unique on job_id). */
export const feynmanEvaluationProjector = rowProjector({
  key: "feynman_evaluation",
  output: FeynmanEvaluationOutput,
  table: "learning_evaluation",
  uniqueBy: ["job_id"],
  jsonColumns: ["gaps"],
  orderBy: "id",
  artifactType: "learning_evaluation",
  rows: (job, output) => [{
    user_id: job.userId,
    concept: conceptOf(job.input),
    score: output.score,
    feedback: output.feedback,
    gaps: output.gaps
  }],
  record: Schema.Struct({
    id: Schema.String,
    concept: Schema.String,
    score: Schema.Number,
    feedback: Schema.String,
    gaps: Schema.Array(Schema.String)
  })
})
