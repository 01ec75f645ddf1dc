import { Schema } from "effect"

/** `TOO_MANY_JOBS`: the user already has the most queued + running jobs allowed. */
export class TooManyJobs extends Schema.TaggedError<TooManyJobs>()("TooManyJobs", {
  userId: Schema.String,
  limit: Schema.Number,
  /** The jobs the refused create asked for at once (a batch); absent means one. */
  requested: Schema.optional(Schema.Number)
}) {}

/** `QUOTA_EXCEEDED`: the user created the most jobs allowed in this UTC day. */
export class QuotaExceeded extends Schema.TaggedError<QuotaExceeded>()("QuotaExceeded", {
  userId: Schema.String,
  limit: Schema.Number,
  /** The jobs the refused create asked for at once (a batch); absent means one. */
  requested: Schema.optional(Schema.Number)
}) {}
