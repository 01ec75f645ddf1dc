import type { JobTypeModule } from "../JobTypeModule.js"
import { feynmanEvaluation } from "./definition.js"
import { feynmanEvaluationProjector } from "./projector.js"
import { feynmanEvaluationPrompts } from "./prompt.js"

export const feynmanEvaluationJobType: JobTypeModule = {
  spec: feynmanEvaluation,
  prompts: feynmanEvaluationPrompts,
  projector: feynmanEvaluationProjector
}
