import { Schema } from "effect"

/** Each way a job definition can be wrong has its own error. */

export class DuplicateJobDefinition extends Schema.TaggedError<DuplicateJobDefinition>()("DuplicateJobDefinition", {
  jobType: Schema.String
}) {}

export class UnknownJobType extends Schema.TaggedError<UnknownJobType>()("UnknownJobType", {
  jobType: Schema.String
}) {}

export class InvalidJobType extends Schema.TaggedError<InvalidJobType>()("InvalidJobType", {
  jobType: Schema.String
}) {}

export class InvalidQueue extends Schema.TaggedError<InvalidQueue>()("InvalidQueue", {
  jobType: Schema.String,
  queueName: Schema.String
}) {}

export class InvalidTimeout extends Schema.TaggedError<InvalidTimeout>()("InvalidTimeout", {
  jobType: Schema.String,
  timeoutMs: Schema.Number
}) {}

export class InvalidPriority extends Schema.TaggedError<InvalidPriority>()("InvalidPriority", {
  jobType: Schema.String,
  priority: Schema.Number
}) {}

export class InvalidMaxRetries extends Schema.TaggedError<InvalidMaxRetries>()("InvalidMaxRetries", {
  jobType: Schema.String,
  maxRetries: Schema.Number
}) {}

export class InvalidRetryBackoff extends Schema.TaggedError<InvalidRetryBackoff>()("InvalidRetryBackoff", {
  jobType: Schema.String,
  delayMs: Schema.Number
}) {}

export class CredentialModeNotAllowed extends Schema.TaggedError<CredentialModeNotAllowed>()(
  "CredentialModeNotAllowed",
  { jobType: Schema.String, mode: Schema.String }
) {}

export class UnknownProjector extends Schema.TaggedError<UnknownProjector>()("UnknownProjector", {
  jobType: Schema.String,
  projector: Schema.String
}) {}

/** The definition is not even of the right shape (a missing field, a string for a number). */
export class MalformedJobDefinition extends Schema.TaggedError<MalformedJobDefinition>()("MalformedJobDefinition", {
  message: Schema.String
}) {}

export type JobDefinitionError =
  | DuplicateJobDefinition
  | InvalidJobType
  | InvalidQueue
  | InvalidTimeout
  | InvalidPriority
  | InvalidMaxRetries
  | InvalidRetryBackoff
  | CredentialModeNotAllowed
  | UnknownProjector
  | MalformedJobDefinition
