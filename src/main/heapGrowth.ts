import { Effect, Layer } from "effect"
import { setFlagsFromString } from "node:v8"
import { WorkerSettings } from "../config/WorkerSettings.js"

/** Applies `WORKER_HEAP_GROWTH_PERCENT` (see `heapGrowthPercentConfig`) to this process's V8 heap, before the worker starts. */
export const WorkerHeapGrowth = Layer.effectDiscard(
  Effect.gen(function*() {
    const percent = (yield* WorkerSettings).heapGrowthPercent
    if (percent === 0) return
    // A V8 flag that V8 reads at every full collection, so setting it at run time takes effect.
    yield* Effect.sync(() => setFlagsFromString(`--heap-growing-percent=${percent}`))
    yield* Effect.logDebug("worker heap growth set").pipe(Effect.annotateLogs({ percent }))
  })
)
