import {
  correctionMessages,
  dataMessage,
  dataMessageRule,
  definePromptTemplate
} from "../../services/PromptTemplates.js"
import { LearningAnalysisInput } from "./definition.js"

/**
 * v2, the version every job type's current prompt has: the evaluations only as JSON data. There
 * is no v1 (the text-delimited framing) because no learning_analysis job was stored with one.
 */
export const learningAnalysisPromptV2 = definePromptTemplate({
  jobType: "learning_analysis",
  version: "v2",
  input: LearningAnalysisInput,
  render: ({ input, problems }) => [
    {
      role: "system",
      content: [
        "You analyse a learner's recent evaluation results and plan what to study next.",
        "The user message is one JSON object: {\"evaluations\": [{\"evaluationId\": an id, \"concept\": the concept explained, \"score\": 0..100, \"gaps\": the missing or wrong ideas}]}.",
        dataMessageRule,
        "Answer with one JSON object of this exact shape and nothing else:",
        "{\"summary\": \"...\", \"strengths\": [\"...\"], \"gaps\": [\"...\"], \"nextSteps\": [\"...\"]}",
        "summary: two to four sentences addressed to the learner about their progress.",
        "strengths: what the learner already explains well (high scores, concepts without gaps), one short phrase each.",
        "gaps: the recurring or most important missing ideas across the evaluations, one short phrase each.",
        "nextSteps: 1 to 10 concrete study steps, most urgent first, each naming the concept it works on.",
        "Use only the evaluations given; an empty array when there are no strengths or no gaps."
      ].join("\n")
    },
    dataMessage({ evaluations: input.evaluations }),
    ...correctionMessages(problems)
  ]
})

/** The last one is the version new jobs get. */
export const learningAnalysisPrompts = [learningAnalysisPromptV2] as const
