import type { JobTypeModule } from "../JobTypeModule.js"
import { syntheticEcho } from "./definition.js"
import { syntheticEchoProjector } from "./projector.js"
import { syntheticEchoPrompts } from "./prompt.js"

export const syntheticEchoJobType: JobTypeModule = {
  spec: syntheticEcho,
  prompts: syntheticEchoPrompts,
  projector: syntheticEchoProjector
}
