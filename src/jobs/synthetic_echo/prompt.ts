import { correctionMessages, definePromptTemplate } from "../../services/PromptTemplates.js"
import { SyntheticEchoInput } from "./definition.js"

/** v1: the model is asked to answer `{ "echo": <message> }` (the engine's test job type). */
export const syntheticEchoPromptV1 = definePromptTemplate({
  jobType: "synthetic_echo",
  version: "v1",
  input: SyntheticEchoInput,
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
