import { Schema } from "effect"

/** The input does not match the job type's input Schema; `problems` name the fields. */
export class InvalidJobInput extends Schema.TaggedError<InvalidJobInput>()("InvalidJobInput", {
  jobType: Schema.String,
  problems: Schema.Array(Schema.String)
}) {
  override get message() {
    return `invalid input for ${this.jobType}: ${this.problems.join("; ")}`
  }
}

/**
 * The idempotency key already names a job of this user created from a different request (job
 * type and input): answering with that job would silently drop the new request.
 */
export class IdempotencyKeyReused extends Schema.TaggedError<IdempotencyKeyReused>()("IdempotencyKeyReused", {
  jobType: Schema.String,
  jobId: Schema.String
}) {}

/** The unique key (user_id, job_type, idempotency_key) already holds a job. */
export class DuplicateIdempotencyKey extends Schema.TaggedError<DuplicateIdempotencyKey>()("DuplicateIdempotencyKey", {
  userId: Schema.String,
  jobType: Schema.String,
  idempotencyKey: Schema.String
}) {}
