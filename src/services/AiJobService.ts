import { Effect, Option, Schema } from "effect"
import { newId } from "../domain/Ids.js"
import { requestHash } from "../domain/CanonicalJson.js"
import type { AiJob } from "../domain/AiJob.js"
import type { CredentialMode } from "../domain/CredentialMode.js"
import { IdempotencyKeyReused, InvalidJobInput } from "../domain/JobCreationErrors.js"
import { PersistenceError } from "../domain/PersistenceError.js"
import { enqueueEventFor, enqueueEventType } from "../domain/OutboxEvent.js"
import { JobPriority, priorityRule } from "../domain/JobDefinition.js"
import type { QuotaExceeded, TooManyJobs } from "../domain/QuotaErrors.js"
import type { UnknownJobType } from "../domain/RegistryErrors.js"
import { AiJobLifecycleRepository } from "./AiJobLifecycleRepository.js"
import { CredentialRepository } from "./CredentialRepository.js"
import { JobDefinitionRegistry, type RegisteredJobType } from "./JobDefinitionRegistry.js"
import { OutboxRepository } from "./OutboxRepository.js"
import { OutboxDirectPublisher } from "./OutboxDirectPublisher.js"
import { OutboxSignal } from "./OutboxSignal.js"
import { Quotas } from "./Quotas.js"
import { SnapshotBuilder } from "./SnapshotBuilder.js"
import { SnapshotRepository } from "./SnapshotRepository.js"
import { UnitOfWork } from "./UnitOfWork.js"
import { queueDefaults } from "../config/QueueSettings.js"
import { currentTraceParent } from "../domain/TraceContext.js"
import { increment, jobsCreated } from "./EngineMetrics.js"

/** The spec's `CreateJobInput`, with the job's input itself (docs/architecture.md §5.1). */
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
  /** The job an operator's retry re-creates; recorded on the new job so the two link. */
  readonly retryOf?: string | undefined
  /**
   * A provider whose stored user key the job uses when the user has an active one, the job type
   * allows `user_deepseek_key` and no override names a credential mode. The admission's read of
   * the user finds the key inside the create transaction, with no statement of its own.
   */
  readonly storedKeyOf?: string | undefined
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

// The definition's own priority rule, so an override obeys the same bounds.
const isPriority = Schema.is(JobPriority)

/** Overrides are caller input too: check them against the definition before anything is written. */
const checkOverrides = (registered: RegisteredJobType, request: CreateJobRequest): ReadonlyArray<string> => {
  const { definition } = registered
  const overrides = request.overrides ?? {}
  const problems: Array<string> = []
  if (overrides.priority !== undefined && !isPriority(overrides.priority)) {
    problems.push(`overrides.priority: ${priorityRule}`)
  }
  const mode = overrides.credentialMode ?? definition.credential.defaultMode
  if (!definition.credential.allowedModes.includes(mode)) {
    problems.push(`overrides.credentialMode: ${mode} is not allowed for ${definition.jobType}`)
  }
  if (mode === "user_deepseek_key" && overrides.credentialId === undefined) {
    problems.push("overrides.credentialId: required when the credential mode is user_deepseek_key")
  }
  if (mode === "platform_key" && overrides.credentialId !== undefined) {
    problems.push("overrides.credentialId: only a user_deepseek_key job names a credential")
  }
  if (request.idempotencyKey !== undefined && (request.idempotencyKey.length === 0 || request.idempotencyKey.length > 191)) {
    problems.push("idempotencyKey: must be 1 to 191 characters")
  }
  return problems
}

/** The provider whose active user key to look up, when the request may use one. */
const storedKeyProvider = (registered: RegisteredJobType, request: CreateJobRequest): string | undefined =>
  request.storedKeyOf !== undefined && request.overrides?.credentialMode === undefined &&
    registered.definition.credential.allowedModes.includes("user_deepseek_key")
    ? request.storedKeyOf
    : undefined

/** The service's make, for a test that swaps one of its ports. */
export const makeAiJobService = Effect.gen(function* () {
  const registry = yield* JobDefinitionRegistry
  const jobs = yield* AiJobLifecycleRepository
  const outbox = yield* OutboxRepository
  const snapshots = yield* SnapshotRepository
  const snapshotBuilder = yield* SnapshotBuilder
  const unitOfWork = yield* UnitOfWork
  const signal = yield* OutboxSignal
  const quotas = yield* Quotas
  const credentials = yield* CredentialRepository
  // Where the composition root provides it, the creator queues its own jobs (§6.7); without it
  // the dispatcher, woken by the signal, does.
  const direct = yield* Effect.serviceOption(OutboxDirectPublisher)

  const existing = (request: CreateJobRequest) =>
    request.idempotencyKey === undefined
      ? Effect.succeed(Option.none())
      : jobs.findByIdempotencyKey(request.userId, request.jobType, request.idempotencyKey)

  /** The job a key already names, if it was made from this request; a row without a hash (older than the check) matches. */
  const sameRequest = (job: AiJob, hash: string): Effect.Effect<CreatedJob, IdempotencyKeyReused> =>
    job.requestHash === null || job.requestHash === hash
      ? Effect.succeed<CreatedJob>({ job, created: false })
      : Effect.fail(new IdempotencyKeyReused({ jobType: job.jobType, jobId: job.id }))

  const createJob = (
    request: CreateJobRequest
  ): Effect.Effect<
    CreatedJob,
    UnknownJobType | InvalidJobInput | IdempotencyKeyReused | TooManyJobs | QuotaExceeded | PersistenceError
  > =>
    Effect.gen(function* () {
      const registered = yield* registry.get(request.jobType)
      const { definition } = registered
      const input = yield* registered.decodeInput(request.input)
      const problems = checkOverrides(registered, request)
      if (problems.length > 0) return yield* Effect.fail(new InvalidJobInput({ jobType: request.jobType, problems }))

      const hash = requestHash(definition.jobType, input)
      const found = yield* existing(request)
      if (Option.isSome(found)) return yield* sameRequest(found.value, hash)

      const snapshot = yield* snapshotBuilder.build(definition, input)
      const jobId = yield* newId
      const snapshotId = yield* newId
      const eventId = yield* newId
      const overrides = request.overrides ?? {}
      const priority = overrides.priority ?? definition.queue.defaultPriority

      // This create's span context (read outside the transaction's own span): the dispatcher's
      // and the workers' spans continue it.
      const traceParent = Option.getOrNull(yield* currentTraceParent)
      const keyProvider = storedKeyProvider(registered, request)
      const created = yield* unitOfWork.transaction(
        Effect.gen(function* () {
          const storedKey = request.enforceQuotas !== false
            ? (yield* quotas.admit(request.userId, { activeCredentialOf: keyProvider })).activeCredentialId
            : keyProvider === undefined
            ? Option.none<string>()
            : Option.map(yield* credentials.findActive(request.userId, keyProvider), (record) => record.id)
          const job = yield* jobs.createJob({
            id: jobId,
            userId: request.userId,
            jobType: definition.jobType,
            targetType: request.targetType,
            targetId: request.targetId,
            idempotencyKey: request.idempotencyKey ?? null,
            requestHash: request.idempotencyKey === undefined ? null : hash,
            queueName: definition.queue.queueName,
            priority,
            input,
            credentialMode: overrides.credentialMode ??
              (Option.isSome(storedKey) ? "user_deepseek_key" : definition.credential.defaultMode),
            credentialId: overrides.credentialId ?? Option.getOrNull(storedKey),
            promptVersion: overrides.promptVersion ?? registered.promptVersion ?? "v1",
            inputSchemaVersion: definition.input.schemaVersion,
            outputSchemaVersion: overrides.outputSchemaVersion ?? definition.output.schemaVersion,
            maxAttempts: queueDefaults[definition.queue.queueName].attempts,
            traceParent,
            retriedFromJobId: request.retryOf ?? null
          })
          yield* snapshots.create({ id: snapshotId, jobId, ...snapshot })
          // The job id already carries the idempotency (the job's unique key decided it), so the
          // dedupe key is per job: the spec's `{jobType}:{userId}:{key}` is ambiguous when a user id
          // contains ':' and would then swallow another job's event.
          const event = enqueueEventFor(job, { eventId, dedupeKey: `${enqueueEventType}:${jobId}` })
          yield* outbox.createInTransaction(
            Option.isSome(direct) ? { ...event, delayMs: direct.value.graceMs } : event
          )
          return job
        })
      ).pipe(
        Effect.map((job): CreatedJob => ({ job, created: true })),
        // A concurrent create with the same key won the unique index; return its job.
        Effect.catchTag("DuplicateIdempotencyKey", () =>
          existing(request).pipe(
            Effect.flatMap(
              Option.match({
                onNone: (): Effect.Effect<CreatedJob, IdempotencyKeyReused | PersistenceError> =>
                  Effect.fail(
                    new PersistenceError({ operation: "ai_job.create", message: "the idempotency key conflicted but its job cannot be read" })
                  ),
                onSome: (job) => sameRequest(job, hash)
              })
            )
          ))
      )
      if (created.created) {
        yield* Option.match(direct, {
          onNone: () => signal.notify,
          onSome: (publisher) =>
            publisher.publish({
              eventId,
              jobId: created.job.id,
              jobType: created.job.jobType,
              queueName: created.job.queueName,
              priority: created.job.priority,
              createdAt: created.job.createdAt,
              traceParent: created.job.traceParent
            })
        })
        yield* increment(jobsCreated, { job_type: created.job.jobType })
      }
      yield* Effect.annotateLogs(Effect.logDebug("job created"), {
        jobId: created.job.id,
        jobType: created.job.jobType,
        created: created.created
      })
      return created
    }).pipe(Effect.withSpan("job.create", { captureStackTrace: false, attributes: { "ai_job.type": request.jobType } }))

  return {
    /**
     * Validates the input against the job type's Schema, then writes job, snapshot and outbox
     * event in one transaction, after the user's limits admit it. Concurrent calls with one
     * idempotency key all get the one job; a key reused with a different input is refused.
     */
    createJob
  }
})


/**
 * The one way a job comes to exist (docs/architecture.md §5.1). Its ports (repositories, unit of
 * work, signal, quotas) stay open: the composition root picks their backing.
 */
export class AiJobService extends Effect.Service<AiJobService>()("ai-job-engine/AiJobService", {
  effect: makeAiJobService
}) {}
