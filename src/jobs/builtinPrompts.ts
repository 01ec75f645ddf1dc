import { type PromptTemplate, PromptTemplates } from "../services/PromptTemplates.js"
import { jobCatalog } from "./catalog.js"

export const builtinPromptTemplates: ReadonlyArray<PromptTemplate> = jobCatalog.flatMap((jobType) => jobType.prompts)

export const BuiltinPromptTemplatesLive = PromptTemplates.Default(builtinPromptTemplates)
