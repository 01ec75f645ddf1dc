/**
 * What a batch create sent with an `Idempotency-Key` made (`ai_job_batch`): the jobs, in the
 * order the request listed them, and the hash of the request they were made from.
 */
export interface JobBatchRecord {
  readonly id: string
  readonly userId: string
  readonly jobType: string
  readonly idempotencyKey: string
  /** SHA-256 of the canonical job type and validated inputs: another body under the key is refused. */
  readonly requestHash: string
  readonly jobIds: ReadonlyArray<string>
}
