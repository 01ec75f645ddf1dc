import type { JobTypeModule } from "../JobTypeModule.js"
import { learningAnalysis } from "./definition.js"
import { learningAnalysisProjector } from "./projector.js"
import { learningAnalysisPrompts } from "./prompt.js"

export const learningAnalysisJobType: JobTypeModule = {
  spec: learningAnalysis,
  prompts: learningAnalysisPrompts,
  projector: learningAnalysisProjector
}
