import { Option, Schema } from "effect"
import { rowProjector } from "../rowProjector.js"
import { LearningAnalysisInput } from "./definition.js"
import { LearningAnalysisOutput } from "./output.js"

const evaluationIdsOf = (input: unknown): ReadonlyArray<string> =>
  Option.match(Schema.decodeUnknownOption(LearningAnalysisInput)(input), {
    onNone: () => [],
    onSome: (decoded) => decoded.evaluations.map((evaluation) => evaluation.evaluationId)
  })

/** One `learning_analysis` row per job (unique on job_id), naming the evaluations it read. */
export const learningAnalysisProjector = rowProjector({
  key: "learning_analysis",
  output: LearningAnalysisOutput,
  table: "learning_analysis",
  uniqueBy: ["job_id"],
  jsonColumns: ["evaluation_ids", "strengths", "gaps", "next_steps"],
  orderBy: "id",
  artifactType: "learning_analysis",
  rows: (job, output) => [{
    user_id: job.userId,
    evaluation_ids: evaluationIdsOf(job.input),
    summary: output.summary,
    strengths: output.strengths,
    gaps: output.gaps,
    next_steps: output.nextSteps
  }],
  record: Schema.Struct({
    id: Schema.String,
    evaluation_ids: Schema.Array(Schema.String),
    summary: Schema.String,
    strengths: Schema.Array(Schema.String),
    gaps: Schema.Array(Schema.String),
    next_steps: Schema.Array(Schema.String)
  }).pipe(
    Schema.rename({ evaluation_ids: "evaluationIds", next_steps: "nextSteps" })
  )
})
