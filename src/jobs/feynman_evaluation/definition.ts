import { Schema } from "effect"
import { defineJobType } from "../../domain/JobType.js"
import { maxChars, minChars } from "../../domain/TextLength.js"
import { FeynmanEvaluationOutput } from "./output.js"

export const FeynmanEvaluationInput = Schema.Struct({
  concept: Schema.String.pipe(minChars(1), maxChars(255)),
  explanation: Schema.String.pipe(minChars(1), maxChars(20_000))
})
export type FeynmanEvaluationInput = typeof FeynmanEvaluationInput.Type

export const feynmanEvaluationDefinition = {
  jobType: "feynman_evaluation",
  metadata: {
    label: "Feynman evaluation",
    description: "Scores a learner's plain-words explanation of a concept and names its gaps.",
    domain: "analysis",
    version: "1.0.0"
  },
  queue: { queueName: "ai-interactive", defaultPriority: 20 },
  execution: {
    timeoutMs: 60_000,
    maxRetries: 2,
    retryBackoff: { type: "exponential", delay: 2_000 },
    cancellable: true,
    abortStrategy: "retry"
  },
  input: { schemaVersion: "feynman_evaluation.input.v1" },
  output: { schemaVersion: "feynman_evaluation.output.v1" },
  credential: { allowedModes: ["platform_key", "user_deepseek_key"], defaultMode: "platform_key" },
  projector: "feynman_evaluation",
  security: { contentSafetyCheck: true, outputRedaction: false }
} as const

export const feynmanEvaluation = defineJobType({
  definition: feynmanEvaluationDefinition,
  input: FeynmanEvaluationInput,
  output: FeynmanEvaluationOutput
})
