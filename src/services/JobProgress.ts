import { Context, Effect, Option } from "effect"

/**
 * Finer progress during EXECUTE, from code inside the provider call (a streaming gateway, a job
 * type's steps). It only raises, within 20..79, what the lease keeper writes on its next beat, so
 * reporting costs no write of its own.
 */
export class JobProgress extends Context.Tag("ai-job-engine/JobProgress")<
  JobProgress,
  { readonly report: (percent: number) => Effect.Effect<void> }
>() {}

/** Reports progress if the caller runs inside a job's EXECUTE; anywhere else it does nothing. */
export const reportProgress = (percent: number): Effect.Effect<void> =>
  Effect.flatMap(
    Effect.serviceOption(JobProgress),
    Option.match({ onNone: () => Effect.void, onSome: (progress) => progress.report(percent) })
  )
