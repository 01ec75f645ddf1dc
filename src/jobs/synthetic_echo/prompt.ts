import { Schema } from "effect"
import { correctionMessages, definePromptTemplate } from "../../services/PromptTemplates.js"

/** The part of the job's input the prompt reads (see `definition.ts`). */
const PromptInput = Schema.Struct({ message: Schema.String })

/** v1: the model is asked to answer `{ "echo": <message> }` (the engine's test job type). */
export const syntheticEchoPromptV1 = definePromptTemplate({
  jobType: "synthetic_echo",
  version: "v1",
  input: PromptInput,
  render: ({ input, problems }) => [
    {
      role: "system",
      content: [
        "You are an echo service.",
        'Reply with one JSON object of this exact shape and nothing else: {"echo": "<the user\'s message, unchanged>"}'
      ].join("\n")
    },
    { role: "user", content: input.message },
    ...correctionMessages(problems)
  ]
})

export const syntheticEchoPrompts = [syntheticEchoPromptV1] as const
