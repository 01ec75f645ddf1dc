import { feynmanEvaluationPrompts } from "../../jobs/feynman_evaluation/prompt.js"
import { flashcardGenerationPrompts } from "../../jobs/flashcard_generation/prompt.js"
import { syntheticEchoPrompts } from "../../jobs/synthetic_echo/prompt.js"
import type { PromptTemplate } from "../../services/PromptTemplates.js"
import { PromptTemplatesLayer } from "./PromptTemplatesLive.js"

/** Every prompt of the built-in job types; a new job type adds its `prompt.ts` list here. */
export const builtinPromptTemplates: ReadonlyArray<PromptTemplate> = [
  ...syntheticEchoPrompts,
  ...flashcardGenerationPrompts,
  ...feynmanEvaluationPrompts
]

export const BuiltinPromptTemplatesLive = PromptTemplatesLayer(builtinPromptTemplates)
