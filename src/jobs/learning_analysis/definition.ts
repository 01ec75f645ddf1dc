import { Schema } from "effect"
import { defineJobType } from "../../domain/JobType.js"
import { maxChars, minChars } from "../../domain/TextLength.js"
import { LearningAnalysisOutput } from "./output.js"

/** One evaluation result as a `feynman_evaluation` job's artifacts show it (a `learning_evaluation` row). */
export const EvaluationResult = Schema.Struct({
  evaluationId: Schema.String.pipe(minChars(1), maxChars(36)),
  concept: Schema.String.pipe(minChars(1), maxChars(255)),
  score: Schema.Int.pipe(Schema.between(0, 100)),
  gaps: Schema.Array(Schema.String.pipe(maxChars(1_000))).pipe(Schema.maxItems(50))
})
export type EvaluationResult = typeof EvaluationResult.Type

/**
 * The client passes the evaluation results themselves (copied from its recent evaluations'
 * artifacts), not ids for the engine to look up: the snapshot then freezes exactly what was
 * analysed, so a retry, a takeover or an admin retry sees the same data even after rows change
 * or expire, and creating the job reads no business table. The ids name the rows it came from.
 */
export const LearningAnalysisInput = Schema.Struct({
  evaluations: Schema.Array(EvaluationResult).pipe(Schema.minItems(1), Schema.maxItems(20))
})
export type LearningAnalysisInput = typeof LearningAnalysisInput.Type

export const learningAnalysisDefinition = {
  jobType: "learning_analysis",
  metadata: {
    label: "Learning analysis",
    description: "Reads a learner's recent evaluation results and names strengths, gaps and next steps.",
    domain: "analysis",
    version: "1.0.0"
  },
  // Nobody waits on the answer screen for it, unlike an evaluation: background queue.
  queue: { queueName: "ai-background", defaultPriority: 60 },
  execution: {
    timeoutMs: 90_000,
    maxRetries: 2,
    retryBackoff: { type: "exponential", delay: 5_000 },
    cancellable: true,
    abortStrategy: "retry"
  },
  input: { schemaVersion: "learning_analysis.input.v1" },
  output: { schemaVersion: "learning_analysis.output.v1" },
  credential: { allowedModes: ["platform_key", "user_deepseek_key"], defaultMode: "platform_key" },
  projector: "learning_analysis",
  security: { contentSafetyCheck: true, outputRedaction: false }
} as const

export const learningAnalysis = defineJobType({
  definition: learningAnalysisDefinition,
  input: LearningAnalysisInput,
  output: LearningAnalysisOutput
})
