import { Effect, Layer } from "effect"
import { ResultProjectors, UnknownProjectorKey } from "../../src/services/ResultProjectors.js"

/**
 * A projector registry that knows only keys: enough for the job definition registry's check,
 * for tests that never reach the PROJECT stage.
 */
export const projectorKeysOnly = (keys: ReadonlyArray<string>) =>
  Layer.succeed(ResultProjectors, {
    keys,
    get: (key) => Effect.fail(new UnknownProjectorKey({ key }))
  })
