import type { JobTypeModule } from "../JobTypeModule.js"
import { flashcardGeneration } from "./definition.js"
import { flashcardGenerationProjector } from "./projector.js"
import { flashcardGenerationPrompts } from "./prompt.js"

export const flashcardGenerationJobType: JobTypeModule = {
  spec: flashcardGeneration,
  prompts: flashcardGenerationPrompts,
  projector: flashcardGenerationProjector
}
