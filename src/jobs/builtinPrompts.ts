import { jobCatalog } from "./catalog.js"
import type { PromptTemplate } from "../services/PromptTemplates.js"
import { PromptTemplatesLayer } from "../services/PromptTemplatesLive.js"

/** Every prompt of the job types in the catalog. */
export const builtinPromptTemplates: ReadonlyArray<PromptTemplate> = jobCatalog.flatMap((jobType) => jobType.prompts)

export const BuiltinPromptTemplatesLive = PromptTemplatesLayer(builtinPromptTemplates)
