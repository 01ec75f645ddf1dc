import { Config, Context, Effect, Layer, type Option } from "effect"
import type { PersistenceError } from "../domain/PersistenceError.js"
import { QuotaExceeded, TooManyJobs } from "../domain/QuotaErrors.js"

export interface QuotaLimits {
  /** Queued + running jobs one user may have. */
  readonly maxActiveJobsPerUser: number
  /** Jobs one user may create per UTC day. */
  readonly dailyJobQuota: number
}

export class QuotaLimitsConfig extends Context.Tag("ai-job-engine/QuotaLimits")<QuotaLimitsConfig, QuotaLimits>() {
  static readonly config = Config.all({
    maxActiveJobsPerUser: Config.integer("MAX_ACTIVE_JOBS_PER_USER").pipe(
      Config.withDefault(5),
      Config.validate({ message: "MAX_ACTIVE_JOBS_PER_USER must be a positive whole number", validation: (n) => n > 0 })
    ),
    dailyJobQuota: Config.integer("DAILY_JOB_QUOTA").pipe(
      Config.withDefault(200),
      Config.validate({ message: "DAILY_JOB_QUOTA must be a positive whole number", validation: (n) => n > 0 })
    )
  })
  static readonly layer = Layer.effect(QuotaLimitsConfig, QuotaLimitsConfig.config)
  static readonly make = (limits: Partial<QuotaLimits> = {}) =>
    Layer.succeed(QuotaLimitsConfig, { maxActiveJobsPerUser: 5, dailyJobQuota: 200, ...limits })
}

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
