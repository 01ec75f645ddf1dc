import { Effect, Layer, Option } from "effect"
import { InternalError } from "../domain/ExecutionError.js"
import { type PromptTemplate, PromptTemplates } from "./PromptTemplates.js"

/**
 * PromptTemplates from a list of templates. A duplicate `jobType@version` is a programming
 * error and stops the layer. The last version listed for a job type is its current one.
 */
export const makePromptTemplates = (templates: ReadonlyArray<PromptTemplate>) =>
  Effect.gen(function* () {
    const byKey = new Map<string, PromptTemplate>()
    const versions = new Map<string, Array<string>>()
    for (const template of templates) {
      const key = `${template.jobType}@${template.version}`
      if (byKey.has(key)) return yield* Effect.dieMessage(`prompt template ${key} is registered twice`)
      byKey.set(key, template)
      versions.set(template.jobType, [...(versions.get(template.jobType) ?? []), template.version])
    }
    return PromptTemplates.of({
      render: ({ content, jobType, problems, promptVersion }) =>
        Effect.suspend(() => {
          const template = byKey.get(`${jobType}@${promptVersion}`)
          if (template === undefined) {
            return Effect.fail(
              new InternalError({ code: "INTERNAL_ERROR", message: `no prompt template ${jobType}@${promptVersion}` })
            )
          }
          return template.render(content, problems ?? []).pipe(
            Effect.map((messages) => ({ jobType, version: promptVersion, messages }))
          )
        }),
      currentVersion: (jobType) => Option.fromNullable(versions.get(jobType)?.at(-1)),
      versions: (jobType) => versions.get(jobType) ?? []
    })
  })

export const PromptTemplatesLayer = (templates: ReadonlyArray<PromptTemplate>) =>
  Layer.effect(PromptTemplates, makePromptTemplates(templates))
