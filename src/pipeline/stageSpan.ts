import { Effect } from "effect"

/**
 * A stage's span, as `Effect.fn(name, { captureStackTrace: false })` opens it, for the last
 * pipeable of `Effect.fnUntraced`: `Effect.fn` builds an Error on every call for a stack its
 * span never keeps here, a cost paid five times a job.
 */
export const stageSpan = (name: string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withSpan(effect, name, { captureStackTrace: false })
