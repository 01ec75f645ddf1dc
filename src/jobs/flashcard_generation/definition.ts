import { Schema } from "effect"
import { defineJobType } from "../../domain/JobType.js"
import { maxChars, minChars } from "../../domain/TextLength.js"
import { FlashcardGenerationOutput } from "./output.js"

export const FlashcardGenerationInput = Schema.Struct({
  sourceText: Schema.String.pipe(minChars(1), maxChars(20_000)),
  count: Schema.Int.pipe(Schema.between(1, 50)),
  deckId: Schema.optional(Schema.String.pipe(minChars(1), maxChars(64)))
})
export type FlashcardGenerationInput = typeof FlashcardGenerationInput.Type

export const flashcardGenerationDefinition = {
  jobType: "flashcard_generation",
  metadata: {
    label: "Flashcard generation",
    description: "Writes study flashcards from a source text.",
    domain: "generation",
    version: "1.0.0"
  },
  queue: { queueName: "ai-background", defaultPriority: 50 },
  execution: {
    timeoutMs: 120_000,
    maxRetries: 2,
    retryBackoff: { type: "exponential", delay: 5_000 },
    cancellable: true,
    abortStrategy: "retry"
  },
  input: { schemaVersion: "flashcard_generation.input.v1" },
  output: { schemaVersion: "flashcard_generation.output.v1" },
  credential: { allowedModes: ["platform_key", "user_deepseek_key"], defaultMode: "platform_key" },
  projector: "flashcard_generation",
  security: { contentSafetyCheck: true, outputRedaction: false }
} as const

export const flashcardGeneration = defineJobType({
  definition: flashcardGenerationDefinition,
  input: FlashcardGenerationInput,
  output: FlashcardGenerationOutput,
  checkOutput: (input, output) =>
    output.flashcards.length <= input.count
      ? []
      : [`flashcards: the answer has ${output.flashcards.length}, more than the count the data asks for`]
})
