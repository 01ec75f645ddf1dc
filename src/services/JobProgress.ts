import { Context, Effect, Option } from "effect"

/**
 * Finer progress during EXECUTE: code that runs inside a job's
 * provider call (a gateway that streams, a job type's own steps) reports how far it got. The
 * value only raises what the lease keeper carries to the row on its next beat, within 20..79
 * (past the call's start, short of its validated output) and never backwards: reporting costs
 * no write and no commit of its own.
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
