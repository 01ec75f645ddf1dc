import { Schema } from "effect"

/** The frozen, redacted input a job runs on; deleted after `expiresAt`. */
export class JobSnapshot extends Schema.Class<JobSnapshot>("JobSnapshot")({
  id: Schema.String,
  jobId: Schema.String,
  content: Schema.Unknown,
  redactionVersion: Schema.String,
  expiresAt: Schema.DateFromSelf,
  createdAt: Schema.DateFromSelf
}) {}

export interface NewJobSnapshot {
  readonly id: string
  readonly jobId: string
  readonly content: unknown
  readonly redactionVersion: string
  readonly expiresAt: Date
}
