import { Effect, Either, Option, Schema } from "effect"
import { queueDefaults } from "../config/QueueSettings.js"
import type { AiJob, NewAiJob } from "../domain/AiJob.js"
import { requestHash } from "../domain/CanonicalJson.js"
import type { CredentialMode } from "../domain/CredentialMode.js"
import { newId, newIds } from "../domain/Ids.js"
import { IdempotencyKeyReused, InvalidJobInput } from "../domain/JobCreationErrors.js"
import { JobPriority, priorityRule } from "../domain/JobDefinition.js"
import type { NewJobSnapshot } from "../domain/JobSnapshot.js"
import { enqueueEventFor, enqueueEventType } from "../domain/OutboxEvent.js"
import { PersistenceError } from "../domain/PersistenceError.js"
import type { QuotaExceeded, TooManyJobs } from "../domain/QuotaErrors.js"
import type { UnknownJobType } from "../domain/RegistryErrors.js"
import { currentTraceParent } from "../domain/TraceContext.js"
import { AiJobLifecycleRepository } from "./AiJobLifecycleRepository.js"
import { CredentialRepository } from "./CredentialRepository.js"
import { increment, jobsCreated } from "./EngineMetrics.js"
import { JobDefinitionRegistry, type RegisteredJobType } from "./JobDefinitionRegistry.js"
import { OutboxDirectPublisher } from "./outbox/OutboxDirectPublisher.js"
import { OutboxRepository } from "./outbox/OutboxRepository.js"
import { OutboxSignal } from "./outbox/OutboxSignal.js"
import { Quotas } from "./Quotas.js"
import { type BuiltSnapshot, SnapshotBuilder } from "./SnapshotBuilder.js"
import { SnapshotRepository } from "./SnapshotRepository.js"
import { UnitOfWork } from "./UnitOfWork.js"

/** The spec's `CreateJobInput`, with the job's input itself. */
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

export interface BatchItem {
  readonly targetType: string
  readonly targetId: string
  readonly input: unknown
}

/** Many jobs of one type for one user, created together or not at all. */
export interface CreateJobBatchRequest {
  readonly userId: string
  readonly jobType: string
  readonly items: ReadonlyArray<BatchItem>
  /**
   * When given, the same (user, job type, key) always yields the same jobs, as long as the
   * inputs are the same too (a batch's keys are apart from single creates' keys).
   */
  readonly idempotencyKey?: string | undefined
  /** As on `CreateJobRequest`: every job of the batch may use the user's stored key. */
  readonly storedKeyOf?: string | undefined
}

export interface CreatedJobBatch {
  /** In the order of the request's items. */
  readonly jobs: ReadonlyArray<AiJob>
  /** False when an idempotency key returned a batch that already existed. */
  readonly created: boolean
}

type CreationError =
  | UnknownJobType
  | InvalidJobInput
  | IdempotencyKeyReused
  | TooManyJobs
  | QuotaExceeded
  | PersistenceError

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
  return [...problems, ...checkIdempotencyKey(request.idempotencyKey)]
}

const checkIdempotencyKey = (key: string | undefined): ReadonlyArray<string> =>
  key !== undefined && (key.length === 0 || key.length > 191) ? ["idempotencyKey: must be 1 to 191 characters"] : []

/** The provider whose active user key to look up, when the request may use one. */
const storedKeyProvider = (
  registered: RegisteredJobType,
  request: Pick<CreateJobRequest, "storedKeyOf" | "overrides">
): string | undefined =>
  request.storedKeyOf !== undefined && request.overrides?.credentialMode === undefined &&
    registered.definition.credential.allowedModes.includes("user_deepseek_key")
    ? request.storedKeyOf
    : undefined

/** A batch item's problems, named by its place in the request (`items[3]: sourceText: ...`). */
const atIndex = (index: number, problems: ReadonlyArray<string>): ReadonlyArray<string> =>
  problems.map((problem) => `items[${index}]: ${problem}`)

/** A validated job, ready to be written once the user is admitted: all but its credential. */
interface PreparedJob {
  readonly job: Omit<NewAiJob, "credentialMode" | "credentialId">
  readonly credentialMode: CredentialMode | undefined
  readonly credentialId: string | undefined
  readonly snapshot: NewJobSnapshot
  readonly eventId: string
}

/** Where an idempotency key is kept: on the one job, or on the batch (`ai_job_batch`). */
type KeyedBy =
  | { readonly _tag: "None" }
  | { readonly _tag: "Job"; readonly key: string; readonly hash: string }
  | { readonly _tag: "Batch"; readonly key: string; readonly hash: string; readonly batchId: string }

/** The service's make, for a test that swaps one of its ports. */
export const makeAiJobService = Effect.gen(function*() {
  const registry = yield* JobDefinitionRegistry
  const jobs = yield* AiJobLifecycleRepository
  const outbox = yield* OutboxRepository
  const snapshots = yield* SnapshotRepository
  const snapshotBuilder = yield* SnapshotBuilder
  const unitOfWork = yield* UnitOfWork
  const signal = yield* OutboxSignal
  const quotas = yield* Quotas
  const credentials = yield* CredentialRepository
  // Where the composition root provides it, the creator queues its own jobs; without it
  // the dispatcher, woken by the signal, does.
  const direct = yield* Effect.serviceOption(OutboxDirectPublisher)

  /** The job a key already names, if it was made from this request; a row without a hash (older than the check) matches. */
  const sameRequest = (job: AiJob, hash: string): Effect.Effect<CreatedJob, IdempotencyKeyReused> =>
    job.requestHash === null || job.requestHash === hash
      ? Effect.succeed<CreatedJob>({ job, created: false })
      : Effect.fail(new IdempotencyKeyReused({ jobType: job.jobType, jobId: job.id }))

  /** What a key already names, answered again when it was made from this request; none when the key is new. */
  const replay = (userId: string, jobType: string, keyedBy: KeyedBy) =>
    Effect.gen(function*() {
      switch (keyedBy._tag) {
        case "None":
          return Option.none<CreatedJobBatch>()
        case "Job": {
          const found = yield* jobs.findByIdempotencyKey(userId, jobType, keyedBy.key)
          if (Option.isNone(found)) return Option.none<CreatedJobBatch>()
          const { job } = yield* sameRequest(found.value, keyedBy.hash)
          return Option.some<CreatedJobBatch>({ jobs: [job], created: false })
        }
        case "Batch": {
          const batch = yield* jobs.findBatchByIdempotencyKey(userId, jobType, keyedBy.key)
          if (Option.isNone(batch)) return Option.none<CreatedJobBatch>()
          if (batch.value.requestHash !== keyedBy.hash) {
            return yield* Effect.fail(
              new IdempotencyKeyReused({ jobType, jobId: batch.value.jobIds[0] ?? batch.value.id })
            )
          }
          return Option.some<CreatedJobBatch>({ jobs: yield* jobs.findByIds(batch.value.jobIds), created: false })
        }
      }
    })

  /** Step 1: the job type's definition and the input decoded by its Schema. */
  const validate = (request: CreateJobRequest) =>
    Effect.gen(function*() {
      const registered = yield* registry.get(request.jobType)
      const input = yield* registered.decodeInput(request.input)
      const problems = checkOverrides(registered, request)
      if (problems.length > 0) return yield* Effect.fail(new InvalidJobInput({ jobType: request.jobType, problems }))
      return { registered, input }
    })

  /** A job's row, snapshot and event, from its built snapshot and its ids. */
  const preparedJob = (
    registered: RegisteredJobType,
    request: CreateJobRequest,
    input: unknown,
    keyedBy: KeyedBy,
    traceParent: string | null,
    built: BuiltSnapshot,
    { eventId, jobId, snapshotId }: { readonly jobId: string; readonly snapshotId: string; readonly eventId: string }
  ): PreparedJob => {
    const { definition } = registered
    const overrides = request.overrides ?? {}
    return {
      job: {
        id: jobId,
        userId: request.userId,
        jobType: definition.jobType,
        targetType: request.targetType,
        targetId: request.targetId,
        idempotencyKey: keyedBy._tag === "Job" ? keyedBy.key : null,
        requestHash: keyedBy._tag === "Job" ? keyedBy.hash : null,
        queueName: definition.queue.queueName,
        priority: overrides.priority ?? definition.queue.defaultPriority,
        input,
        promptVersion: overrides.promptVersion ?? registered.promptVersion ?? "v1",
        inputSchemaVersion: definition.input.schemaVersion,
        outputSchemaVersion: overrides.outputSchemaVersion ?? definition.output.schemaVersion,
        maxAttempts: queueDefaults[definition.queue.queueName].attempts,
        traceParent,
        retriedFromJobId: request.retryOf ?? null
      },
      credentialMode: overrides.credentialMode,
      credentialId: overrides.credentialId,
      snapshot: { id: snapshotId, jobId, ...built },
      eventId
    }
  }

  /** Step 2: the job's row, snapshot and event ids, before admission picks its credential. */
  const prepare = (
    registered: RegisteredJobType,
    request: CreateJobRequest,
    input: unknown,
    keyedBy: KeyedBy,
    traceParent: string | null
  ) =>
    Effect.gen(function*() {
      const built = yield* snapshotBuilder.build(registered.definition, input)
      const jobId = yield* newId
      const snapshotId = yield* newId
      const eventId = yield* newId
      return preparedJob(registered, request, input, keyedBy, traceParent, built, { jobId, snapshotId, eventId })
    })

  /** Step 2 for a batch: its ids drawn together, three a job in the order `prepare` draws them. */
  const prepareBatch = (
    registered: RegisteredJobType,
    requests: ReadonlyArray<CreateJobRequest>,
    inputs: ReadonlyArray<unknown>,
    keyedBy: KeyedBy,
    traceParent: string | null
  ) =>
    Effect.flatMap(
      newIds(requests.length * 3),
      (ids) =>
        Effect.forEach(requests, (request, index) =>
          Effect.map(snapshotBuilder.build(registered.definition, inputs[index]), (built) =>
            preparedJob(registered, request, inputs[index], keyedBy, traceParent, built, {
              jobId: ids[index * 3] ?? "",
              snapshotId: ids[index * 3 + 1] ?? "",
              eventId: ids[index * 3 + 2] ?? ""
            })))
    )

  /**
   * Step 3, inside the transaction: the user's limits admit all the jobs at once (an operator's
   * retry skips them), and the same read finds the stored key the jobs may use.
   */
  const admit = (userId: string, count: number, keyProvider: string | undefined, enforceQuotas: boolean) =>
    enforceQuotas
      ? Effect.map(
        quotas.admit(userId, { activeCredentialOf: keyProvider, jobs: count }),
        (admitted) => admitted.activeCredentialId
      )
      : keyProvider === undefined
      ? Effect.succeed(Option.none<string>())
      : Effect.map(credentials.findActive(userId, keyProvider), Option.map((record) => record.id))

  /** The outbox event that queues a new job, delayed by the direct publisher's grace when it queues the job itself. */
  const enqueueEvent = (job: AiJob, eventId: string) => {
    // The job id already carries the idempotency (the job's unique key decided it), so the
    // dedupe key is per job: the spec's `{jobType}:{userId}:{key}` is ambiguous when a user id
    // contains ':' and would then swallow another job's event.
    const event = enqueueEventFor(job, { eventId, dedupeKey: `${enqueueEventType}:${job.id}` })
    return Option.isSome(direct) ? { ...event, delay: direct.value.grace } : event
  }

  /** Step 4, inside the transaction: jobs, snapshots and outbox events, one statement per table. */
  const write = (
    prepared: ReadonlyArray<PreparedJob>,
    storedKey: Option.Option<string>,
    registered: RegisteredJobType
  ) =>
    Effect.gen(function*() {
      const newJobs = prepared.map(({ credentialId, credentialMode, job }): NewAiJob => ({
        ...job,
        credentialMode: credentialMode ??
          (Option.isSome(storedKey) ? "user_deepseek_key" : registered.definition.credential.defaultMode),
        credentialId: credentialId ?? Option.getOrNull(storedKey)
      }))
      const [one] = newJobs
      const [onePrepared] = prepared
      // One job keeps the single-row statements (and their ports) a single create always used.
      if (newJobs.length === 1 && one !== undefined && onePrepared !== undefined) {
        const job = yield* jobs.createJob(one)
        yield* snapshots.create(onePrepared.snapshot)
        yield* outbox.createInTransaction(enqueueEvent(job, onePrepared.eventId))
        return [job]
      }
      const created = yield* jobs.createJobs(newJobs)
      yield* snapshots.createMany(prepared.map((job) => job.snapshot))
      yield* outbox.createManyInTransaction(
        created.map((job, index) => enqueueEvent(job, prepared[index]?.eventId ?? ""))
      )
      return created
    })

  /** Step 5, after the commit: queue the jobs now (or wake the dispatcher), and count them. */
  const publish = (created: ReadonlyArray<AiJob>, prepared: ReadonlyArray<PreparedJob>) =>
    Effect.gen(function*() {
      yield* Option.match(direct, {
        onNone: () => signal.notify,
        onSome: (publisher) =>
          publisher.publishMany(created.map((job, index) => ({
            eventId: prepared[index]?.eventId ?? "",
            jobId: job.id,
            jobType: job.jobType,
            queueName: job.queueName,
            priority: job.priority,
            createdAt: job.createdAt,
            traceParent: job.traceParent
          })))
      })
      const [first] = created
      if (first !== undefined) yield* increment(jobsCreated, { job_type: first.jobType }, created.length)
    })

  /**
   * Steps 3 to 5 for jobs of one type and user: admitted, written and (with a batch key)
   * recorded in one transaction, then queued. A concurrent create with the same key that won
   * the unique index answers for this one.
   */
  const commit = (options: {
    readonly userId: string
    readonly registered: RegisteredJobType
    readonly prepared: ReadonlyArray<PreparedJob>
    readonly keyedBy: KeyedBy
    readonly keyProvider: string | undefined
    readonly enforceQuotas: boolean
  }): Effect.Effect<CreatedJobBatch, IdempotencyKeyReused | TooManyJobs | QuotaExceeded | PersistenceError> => {
    const { keyedBy, prepared, registered, userId } = options
    const jobType = registered.definition.jobType
    return unitOfWork.transaction(
      Effect.gen(function*() {
        // The batch's key goes first: a concurrent batch with the same key waits on it and then
        // answers with this one's jobs, rather than being refused by limits this one used up.
        if (keyedBy._tag === "Batch") {
          yield* jobs.recordBatch({
            id: keyedBy.batchId,
            userId,
            jobType,
            idempotencyKey: keyedBy.key,
            requestHash: keyedBy.hash,
            jobIds: prepared.map((job) => job.job.id)
          })
        }
        const storedKey = yield* admit(userId, prepared.length, options.keyProvider, options.enforceQuotas)
        return yield* write(prepared, storedKey, registered)
      })
    ).pipe(
      Effect.map((created): CreatedJobBatch => ({ jobs: created, created: true })),
      Effect.catchTag("DuplicateIdempotencyKey", () =>
        Effect.flatMap(
          replay(userId, jobType, keyedBy),
          Option.match({
            onNone: (): Effect.Effect<CreatedJobBatch, PersistenceError> =>
              Effect.fail(
                new PersistenceError({
                  operation: "ai_job.create",
                  message: "the idempotency key conflicted but its job cannot be read"
                })
              ),
            onSome: Effect.succeed
          })
        )),
      Effect.tap((result) => (result.created ? publish(result.jobs, prepared) : Effect.void))
    )
  }

  const createJob = (request: CreateJobRequest): Effect.Effect<CreatedJob, CreationError> =>
    Effect.gen(function*() {
      const { input, registered } = yield* validate(request)
      const keyedBy: KeyedBy = request.idempotencyKey === undefined
        ? { _tag: "None" }
        : { _tag: "Job", key: request.idempotencyKey, hash: requestHash(registered.definition.jobType, input) }
      const found = yield* replay(request.userId, request.jobType, keyedBy)
      if (Option.isSome(found)) return yield* firstOf(found.value)

      // This create's span context (read outside the transaction's own span): the dispatcher's
      // and the workers' spans continue it.
      const traceParent = Option.getOrNull(yield* currentTraceParent)
      const prepared = yield* prepare(registered, request, input, keyedBy, traceParent)
      const created = yield* firstOf(
        yield* commit({
          userId: request.userId,
          registered,
          prepared: [prepared],
          keyedBy,
          keyProvider: storedKeyProvider(registered, request),
          enforceQuotas: request.enforceQuotas !== false
        })
      )
      yield* Effect.annotateLogs(Effect.logDebug("job created"), {
        jobId: created.job.id,
        jobType: created.job.jobType,
        created: created.created
      })
      return created
    }).pipe(Effect.withSpan("job.create", { captureStackTrace: false, attributes: { "ai_job.type": request.jobType } }))

  const createJobBatch = (request: CreateJobBatchRequest): Effect.Effect<CreatedJobBatch, CreationError> =>
    Effect.gen(function*() {
      const registered = yield* registry.get(request.jobType)
      const decoded = yield* Effect.forEach(
        request.items,
        (item, index) =>
          Effect.either(Effect.mapError(registered.decodeInput(item.input), (error) => atIndex(index, error.problems)))
      )
      const problems = [
        ...decoded.flatMap((result) => (Either.isLeft(result) ? result.left : [])),
        ...checkIdempotencyKey(request.idempotencyKey)
      ]
      if (problems.length > 0) return yield* Effect.fail(new InvalidJobInput({ jobType: request.jobType, problems }))
      const inputs = decoded.flatMap((result) => (Either.isRight(result) ? [result.right] : []))

      const keyedBy: KeyedBy = request.idempotencyKey === undefined
        ? { _tag: "None" }
        : {
          _tag: "Batch",
          key: request.idempotencyKey,
          hash: requestHash(registered.definition.jobType, inputs),
          batchId: yield* newId
        }
      const found = yield* replay(request.userId, request.jobType, keyedBy)
      if (Option.isSome(found)) return found.value

      const traceParent = Option.getOrNull(yield* currentTraceParent)
      const prepared = yield* prepareBatch(
        registered,
        request.items.map((item) => ({ ...item, userId: request.userId, jobType: request.jobType })),
        inputs,
        keyedBy,
        traceParent
      )
      const created = yield* commit({
        userId: request.userId,
        registered,
        prepared,
        keyedBy,
        keyProvider: storedKeyProvider(registered, request),
        enforceQuotas: true
      })
      yield* Effect.annotateLogs(Effect.logDebug("job batch created"), {
        jobType: request.jobType,
        jobs: created.jobs.length,
        created: created.created
      })
      return created
    }).pipe(Effect.withSpan("job.createBatch", {
      captureStackTrace: false,
      attributes: { "ai_job.type": request.jobType, "ai_job.batch_size": request.items.length }
    }))

  return {
    /**
     * Job, snapshot and outbox event in one transaction. Concurrent calls with one idempotency key
     * all get the one job; the key with another input is refused.
     */
    createJob,
    /** All or none: a bad input fails the batch (named by its index); the limits admit the batch whole. */
    createJobBatch
  }
})

const firstOf = (result: CreatedJobBatch): Effect.Effect<CreatedJob, PersistenceError> => {
  const [job] = result.jobs
  return job === undefined
    ? Effect.fail(new PersistenceError({ operation: "ai_job.create", message: "the create answered no job" }))
    : Effect.succeed({ job, created: result.created })
}

/**
 * The one way a job comes to exist (docs/architecture.md §5.1). Its ports (repositories, unit of
 * work, signal, quotas) stay open: the composition root picks their backing.
 */
export class AiJobService extends Effect.Service<AiJobService>()("ai-job-engine/AiJobService", {
  effect: makeAiJobService
}) {}
