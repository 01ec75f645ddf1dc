import { Effect, Layer } from "effect"
import { JobDefinitionRegistry } from "../services/JobDefinitionRegistry.js"
import { ResultProjectors, UnknownProjectorKey } from "../services/ResultProjectors.js"
import { jobCatalog } from "./catalog.js"
import type { JobTypeModule } from "./JobTypeModule.js"

/** The projectors of `modules`, by key; needs the `ProjectionStore` they write to. */
export const resultProjectorsOf = (modules: ReadonlyArray<JobTypeModule>) =>
  Layer.effect(
    ResultProjectors,
    Effect.gen(function*() {
      const projectors = yield* Effect.forEach(modules, (module) => module.projector)
      const byKey = new Map(projectors.map((projector) => [projector.key, projector]))
      return ResultProjectors.of({
        keys: Array.from(byKey.keys()),
        get: (key) => {
          const projector = byKey.get(key)
          return projector === undefined ? Effect.fail(new UnknownProjectorKey({ key })) : Effect.succeed(projector)
        }
      })
    })
  )

/**
 * The registry and the projectors of `modules`: every definition checked at start (a broken
 * one stops the process with its own error). Needs `ProjectionStore`.
 */
export const jobCatalogLayer = (modules: ReadonlyArray<JobTypeModule>) =>
  JobDefinitionRegistry.withSpecs(
    // New jobs get the module's current prompt: the last version it lists.
    modules.map((module) => ({
      ...module.spec,
      promptVersion: module.spec.promptVersion ?? module.prompts.at(-1)?.version
    }))
  ).pipe(Layer.provideMerge(resultProjectorsOf(modules)))

export const JobCatalogLive = jobCatalogLayer(jobCatalog)
