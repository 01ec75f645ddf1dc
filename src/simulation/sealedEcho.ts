import { Schema } from "effect"
import { defineJobType } from "../domain/JobType.js"
import { maxChars, minChars } from "../domain/TextLength.js"
import type { JobTypeModule } from "../jobs/JobTypeModule.js"
import { syntheticEchoDefinition } from "../jobs/synthetic_echo/definition.js"
import { SyntheticEchoOutput } from "../jobs/synthetic_echo/output.js"
import { syntheticEchoProjector } from "../jobs/synthetic_echo/projector.js"
import { correctionMessages, dataMessage, dataMessageRule, definePromptTemplate } from "../services/PromptTemplates.js"

/**
 * A simulation-only job type whose snapshot differs from its input: the input carries an
 * `accessToken`, which the engine's snapshot redacts, beside the message to echo. A run that
 * works from the job's input instead of its snapshot sends the token to the provider, which the
 * simulation's monitor sees.
 */
export const SealedEchoInput = Schema.Struct({
  message: Schema.String.pipe(minChars(1), maxChars(10_000)),
  accessToken: Schema.String
})

export const sealedEchoDefinition = {
  ...syntheticEchoDefinition,
  jobType: "synthetic_sealed_echo",
  metadata: { ...syntheticEchoDefinition.metadata, label: "Sealed echo (simulation)" },
  input: { schemaVersion: "synthetic_sealed_echo.input.v1" }
} as const

export const sealedEchoJobType: JobTypeModule = {
  spec: defineJobType({
    definition: sealedEchoDefinition,
    input: SealedEchoInput,
    output: SyntheticEchoOutput,
    checkOutput: (input, output) => (output.echo === input.message ? [] : ["echo must repeat the message exactly"])
  }),
  prompts: [
    definePromptTemplate({
      jobType: "synthetic_sealed_echo",
      version: "v1",
      input: SealedEchoInput,
      render: ({ input, problems }) => [
        {
          role: "system",
          content: [
            "You are an echo service.",
            "The user message is one JSON object: {\"message\": the text to echo}.",
            dataMessageRule,
            "Reply with one JSON object of this exact shape and nothing else: {\"echo\": \"<message, unchanged>\"}"
          ].join("\n")
        },
        dataMessage({ message: input.message }),
        ...correctionMessages(problems)
      ]
    })
  ],
  // The echo's own projector (its key is the definition's `projector`).
  projector: syntheticEchoProjector
}
