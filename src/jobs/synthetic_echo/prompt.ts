import {
  correctionMessages,
  dataMessage,
  dataMessageRule,
  definePromptTemplate
} from "../../services/PromptTemplates.js"
import { SyntheticEchoInput } from "./definition.js"

/** v1 (jobs stamped before v2 only): the message as the whole user message. */
export const syntheticEchoPromptV1 = definePromptTemplate({
  jobType: "synthetic_echo",
  version: "v1",
  input: SyntheticEchoInput,
  render: ({ input, problems }) => [
    {
      role: "system",
      content: [
        "You are an echo service.",
        "Reply with one JSON object of this exact shape and nothing else: {\"echo\": \"<the user's message, unchanged>\"}"
      ].join("\n")
    },
    { role: "user", content: input.message },
    ...correctionMessages(problems)
  ]
})

/** v2: the model is asked to answer `{ "echo": <message> }`, the message given as JSON data. */
export const syntheticEchoPromptV2 = definePromptTemplate({
  jobType: "synthetic_echo",
  version: "v2",
  input: SyntheticEchoInput,
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

/** The last one is the version new jobs get. */
export const syntheticEchoPrompts = [syntheticEchoPromptV1, syntheticEchoPromptV2] as const
