import { feynmanEvaluationJobType } from "./feynman_evaluation/index.js"
import { flashcardGenerationJobType } from "./flashcard_generation/index.js"
import type { JobTypeModule } from "./JobTypeModule.js"
import { learningAnalysisJobType } from "./learning_analysis/index.js"
import { syntheticEchoJobType } from "./synthetic_echo/index.js"

/** Every job type the engine runs. A new job type is one folder and one line here. */
export const jobCatalog: ReadonlyArray<JobTypeModule> = [
  syntheticEchoJobType,
  flashcardGenerationJobType,
  feynmanEvaluationJobType,
  learningAnalysisJobType
]
