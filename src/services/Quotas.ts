import { Context, Effect, type Option } from "effect"
import type { QuotaLimits } from "../config/QuotaLimitsConfig.js"
import type { PersistenceError } from "../domain/PersistenceError.js"
import { QuotaExceeded, TooManyJobs } from "../domain/QuotaErrors.js"

/** What the admission read found besides the counts. */
export interface Admitted {
  /** The user's active stored key for the provider asked about; none when none was asked. */
  readonly activeCredentialId: Option.Option<string>
}

/**
 * Admission of a new job against the user's limits. `admit` runs inside the create
 * transaction and serializes one user's concurrent creates, so the limits hold under races.
 * Asked with `activeCredentialOf`, the same read also finds the user's active key for that
 * provider: a create that would use a stored key then costs no statement of its own for it.
 */
export class Quotas extends Context.Tag("ai-job-engine/Quotas")<
  Quotas,
  {
    readonly admit: (
      userId: string,
      options?: {
        readonly activeCredentialOf?: string | undefined
        /** How many jobs the create adds at once (a batch counts whole); one unless given. */
        readonly jobs?: number | undefined
      }
    ) => Effect.Effect<Admitted, TooManyJobs | QuotaExceeded | PersistenceError>
  }
>() {}

/**
 * The admission rule both stores apply to the user's counts: too many active jobs first, then
 * the day's quota. `requested` jobs are admitted together or not at all.
 */
export const admission = (
  userId: string,
  limits: QuotaLimits,
  counts: { readonly active: number; readonly today: number },
  requested = 1
): Effect.Effect<void, TooManyJobs | QuotaExceeded> => {
  const asked = requested === 1 ? {} : { requested }
  if (counts.active + requested > limits.maxActiveJobsPerUser) {
    return Effect.fail(new TooManyJobs({ userId, limit: limits.maxActiveJobsPerUser, ...asked }))
  }
  if (counts.today + requested > limits.dailyJobQuota) {
    return Effect.fail(new QuotaExceeded({ userId, limit: limits.dailyJobQuota, ...asked }))
  }
  return Effect.void
}
