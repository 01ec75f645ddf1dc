import { Context, type Effect } from "effect"
import type { AiJob } from "../domain/AiJob.js"
import type { CredentialMode } from "../domain/CredentialMode.js"
import type { IdempotencyKeyReused, InvalidJobInput } from "../domain/JobCreationErrors.js"
import type { PersistenceError } from "../domain/PersistenceError.js"
import type { QuotaExceeded, TooManyJobs } from "../domain/QuotaErrors.js"
import type { UnknownJobType } from "../domain/RegistryErrors.js"

/** ADR 2.4 `CreateJobInput`, with the job's input itself. */
export interface CreateJobRequest {
  readonly userId: string
  readonly jobType: string
  readonly targetType: string
  readonly targetId: string
  /**
   * When given, the same (user, job type, key) always yields the same job, as long as the input
   * is the same too; another input under the key is `IdempotencyKeyReused`.
   */
  readonly idempotencyKey?: string | undefined
  readonly input: unknown
  /** Off only for an operator's retry, which re-creates a job the user was already admitted for. */
  readonly enforceQuotas?: boolean | undefined
  readonly overrides?: {
    readonly priority?: number | undefined
    readonly credentialMode?: CredentialMode | undefined
    readonly credentialId?: string | undefined
    readonly promptVersion?: string | undefined
    readonly outputSchemaVersion?: string | undefined
  } | undefined
}

export interface CreatedJob {
  readonly job: AiJob
  /** False when an idempotency key returned a job that already existed. */
  readonly created: boolean
}

/** ADR 2.4: the one way a job comes to exist. */
export class AiJobService extends Context.Tag("ai-job-engine/AiJobService")<
  AiJobService,
  {
    /**
     * Validates the input against the job type's Schema, then writes job, snapshot and outbox
     * event in one transaction, after the user's limits admit it. Concurrent calls with one
     * idempotency key all get the one job; a key reused with a different input is refused.
     */
    readonly createJob: (
      request: CreateJobRequest
    ) => Effect.Effect<
      CreatedJob,
      UnknownJobType | InvalidJobInput | IdempotencyKeyReused | TooManyJobs | QuotaExceeded | PersistenceError
    >
  }
>() {}
