import { Config, Context, Layer } from "effect"

export interface QuotaLimits {
  /** Queued + running jobs one user may have. */
  readonly maxActiveJobsPerUser: number
  /** Jobs one user may create per UTC day. */
  readonly dailyJobQuota: number
}

const defaults: QuotaLimits = { maxActiveJobsPerUser: 5, dailyJobQuota: 200 }

/** A user's admission limits: `MAX_ACTIVE_JOBS_PER_USER` (default 5) and `DAILY_JOB_QUOTA` (default 200). */
export class QuotaLimitsConfig extends Context.Tag("ai-job-engine/QuotaLimits")<QuotaLimitsConfig, QuotaLimits>() {
  static readonly defaults = defaults
  static readonly config = Config.all({
    maxActiveJobsPerUser: Config.integer("MAX_ACTIVE_JOBS_PER_USER").pipe(
      Config.withDefault(defaults.maxActiveJobsPerUser),
      Config.validate({ message: "MAX_ACTIVE_JOBS_PER_USER must be a positive whole number", validation: (n) => n > 0 })
    ),
    dailyJobQuota: Config.integer("DAILY_JOB_QUOTA").pipe(
      Config.withDefault(defaults.dailyJobQuota),
      Config.validate({ message: "DAILY_JOB_QUOTA must be a positive whole number", validation: (n) => n > 0 })
    )
  })
  static readonly layer = Layer.effect(QuotaLimitsConfig, QuotaLimitsConfig.config)
  static readonly make = (limits: Partial<QuotaLimits> = {}) =>
    Layer.succeed(QuotaLimitsConfig, { ...defaults, ...limits })
}
