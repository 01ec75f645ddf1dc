import { type PromptTemplate, PromptTemplates } from "../services/PromptTemplates.js"
import { jobCatalog } from "./catalog.js"

/** Every prompt of the job types in the catalog. */
export const builtinPromptTemplates: ReadonlyArray<PromptTemplate> = jobCatalog.flatMap((jobType) => jobType.prompts)

export const BuiltinPromptTemplatesLive = PromptTemplates.Default(builtinPromptTemplates)
