import { Schema } from "effect"

/** ADR 7.3 `TOO_MANY_JOBS`: the user already has the most queued + running jobs allowed. */
export class TooManyJobs extends Schema.TaggedError<TooManyJobs>()("TooManyJobs", {
  userId: Schema.String,
  limit: Schema.Number
}) {}

/** ADR 7.3 `QUOTA_EXCEEDED`: the user created the most jobs allowed in this UTC day. */
export class QuotaExceeded extends Schema.TaggedError<QuotaExceeded>()("QuotaExceeded", {
  userId: Schema.String,
  limit: Schema.Number
}) {}
