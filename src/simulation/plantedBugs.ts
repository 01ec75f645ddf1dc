import { Duration, Effect, Either, HashMap, Option, type Scope, Stream } from "effect"
import { AiJob } from "../domain/AiJob.js"
import { finishedEventFor } from "../domain/JobFinishedEvent.js"
import { JobSnapshot } from "../domain/JobSnapshot.js"
import { JobNotFound } from "../domain/LifecycleErrors.js"
import { takeOverGuard } from "../domain/LifecycleGuards.js"
import { legacyStatusOf } from "../domain/LifecycleStatus.js"
import type { MemoryDatabase } from "../layers/memory/MemoryDatabase.js"
import { insertOutboxEvent } from "../layers/memory/MemoryOutboxRepository.js"
import type { AiJobLifecycleRepository } from "../services/AiJobLifecycleRepository.js"
import type { CancelSignal } from "../services/CancelSignal.js"
import { CredentialVault } from "../services/CredentialVault.js"
import { JobDefinitionRegistry, type RegisteredJobType } from "../services/JobDefinitionRegistry.js"
import type { JobQueue } from "../services/JobQueue.js"
import { ModelRouter } from "../services/ModelRouter.js"
import type { ProviderCapacity } from "../services/ProviderCapacity.js"
import type { ProviderCircuitBreaker } from "../services/ProviderCircuitBreaker.js"
import type { SnapshotRepository } from "../services/SnapshotRepository.js"

/**
 * TEST-ONLY, DELIBERATE BUGS: small, realistic mistakes the simulation plants in its own wiring
 * (a wrapped port or adapter), one at a time, to prove that an invariant catches each. The
 * engine's code is never changed; none of these is ever used outside the simulation.
 */
export const plantedBugs = [
  /** The lease guard skipped on every worker write (the memory store's own switch). */
  "fencing-off",
  /** A takeover of a crashed worker's lock keeps the attempt count, as a hand-off does. */
  "takeover-without-attempt",
  /** The reaper gives up one attempt early (it reads `max_attempts` one too low). */
  "reaper-off-by-one",
  /** Workers ignore cancel requests (their registry says no job type can be cancelled). */
  "ignored-cancel",
  /** The dispatcher's queue add answers before the job is on the queue, so the event is published first. */
  "publish-before-add",
  /** The gateway adapter drops the provider's Retry-After. */
  "retry-after-ignored",
  /** A pickup after a hand-off counts an attempt, as a takeover of a crashed worker's lock does. */
  "handoff-costs-attempt",
  /** PROJECT's `markSucceeded` lost its lease guard: any worker may succeed a job that exists. */
  "project-unfenced",
  /** The gateway adapter reports the provider refusing the key as an outage (retryable). */
  "credential-refusal-retried",
  /** RESOLVE reads the job's input where it should read its snapshot. */
  "snapshot-replaced-by-input",
  /** A worker frees its capacity slot as soon as it gets it, not when the call ends. */
  "capacity-released-early",
  /** A worker hears no cancel while it runs (its keeper's beat and its subscription both miss them). */
  "cancel-deaf",
  /** A worker calls a provider whatever its circuit breaker says: every admission lets the call through. */
  "breaker-ignored",
  /** RESOLVE gives a fallback target the key of the job's own provider (the primary's). */
  "key-crosses-provider",
  /** A worker's routes lose their fallbacks: every call goes to the first target, as with one provider. */
  "fallbacks-dropped"
] as const
export type PlantedBug = (typeof plantedBugs)[number]

/**
 * `takeover-without-attempt`: the memory store's takeover, but the attempt count is left alone
 * for an expired lock too (the real one counts an attempt unless the job was handed off).
 */
export const takeOverWithoutAttempt = (
  jobs: AiJobLifecycleRepository["Type"],
  db: MemoryDatabase["Type"]
): AiJobLifecycleRepository["Type"] => ({
  ...jobs,
  takeOver: (jobId, workerId, lockTtl) =>
    db.write(
      "ai_job.takeOver",
      (tables, now) =>
        Either.map(takeOverGuard(jobId, HashMap.get(tables.aiJob, jobId), now), (job) => {
          const updated = new AiJob(
            {
              ...job,
              lockedBy: workerId,
              lockedAt: now,
              lockUntil: new Date(now.getTime() + Duration.toMillis(lockTtl)),
              leaseNo: job.leaseNo + 1,
              updatedAt: now
            },
            { disableValidation: true }
          )
          return [updated, { ...tables, aiJob: HashMap.set(tables.aiJob, jobId, updated) }] as const
        })
    )
})

/** `reaper-off-by-one`: the reaper's view of expired jobs, each with one attempt fewer allowed. */
export const reaperOffByOne = (jobs: AiJobLifecycleRepository["Type"]): AiJobLifecycleRepository["Type"] => ({
  ...jobs,
  findExpiredLocks: (grace, limit) =>
    Effect.map(
      jobs.findExpiredLocks(grace, limit),
      (expired) =>
        expired.map((job) => new AiJob({ ...job, maxAttempts: job.maxAttempts - 1 }, { disableValidation: true }))
    )
})

const notCancellable = (registered: RegisteredJobType): RegisteredJobType => ({
  ...registered,
  definition: { ...registered.definition, execution: { ...registered.definition.execution, cancellable: false } }
})

/** `ignored-cancel`: a worker's registry that says no job type can be cancelled. */
export const cancelIgnored = (registry: JobDefinitionRegistry): JobDefinitionRegistry =>
  JobDefinitionRegistry.make({
    register: (spec) => Effect.map(registry.register(spec), notCancellable),
    get: (jobType) => Effect.map(registry.get(jobType), notCancellable),
    getAll: Effect.map(registry.getAll, (all) => all.map(notCancellable))
  })

/**
 * `publish-before-add`: a dispatcher's queue whose add answers "added" at once and reaches the
 * queue a moment later (in `scope`: a dispatcher that dies loses it).
 */
export const addAfterAnswer = (queue: JobQueue["Type"], scope: Scope.Scope): JobQueue["Type"] => ({
  ...queue,
  add: (request) =>
    Effect.as(
      Effect.forkIn(Effect.ignore(Effect.zipRight(Effect.sleep(100), queue.add(request))), scope),
      "added" as const
    )
})

// ---- the bugs the extended fault set proves its invariants on ----

/** `handoff-costs-attempt`: the memory store's takeover, but a released lock costs an attempt too. */
export const handOffCostsAttempt = (
  jobs: AiJobLifecycleRepository["Type"],
  db: MemoryDatabase["Type"]
): AiJobLifecycleRepository["Type"] => ({
  ...jobs,
  takeOver: (jobId, workerId, lockTtl) =>
    db.write(
      "ai_job.takeOver",
      (tables, now) =>
        Either.map(takeOverGuard(jobId, HashMap.get(tables.aiJob, jobId), now), (job) => {
          const updated = new AiJob(
            {
              ...job,
              lockedBy: workerId,
              lockedAt: now,
              lockUntil: new Date(now.getTime() + Duration.toMillis(lockTtl)),
              attemptCount: job.attemptCount + 1,
              leaseNo: job.leaseNo + 1,
              updatedAt: now
            },
            { disableValidation: true }
          )
          return [updated, { ...tables, aiJob: HashMap.set(tables.aiJob, jobId, updated) }] as const
        })
    )
})

/**
 * `project-unfenced`: `markSucceeded` checks only that the job exists (no lease, status or
 * cancel); it still writes the terminal event with the status, as the repository does.
 */
export const projectUnfenced = (
  jobs: AiJobLifecycleRepository["Type"],
  db: MemoryDatabase["Type"]
): AiJobLifecycleRepository["Type"] => ({
  ...jobs,
  markSucceeded: (lease, outputHash, options) =>
    db.write(
      "ai_job.markSucceeded",
      (tables, now) =>
        Either.map(
          Either.fromOption(HashMap.get(tables.aiJob, lease.jobId), () => new JobNotFound({ jobId: lease.jobId })),
          (job) => {
            const updated = new AiJob(
              {
                ...job,
                lifecycleStatus: "succeeded",
                status: legacyStatusOf.succeeded,
                progress: 100,
                outputHash,
                lockedBy: null,
                lockUntil: null,
                finishedAt: now,
                updatedAt: now
              },
              { disableValidation: true }
            )
            const written = { ...tables, aiJob: HashMap.set(tables.aiJob, job.id, updated) }
            const event = finishedEventFor(updated, options?.artifacts ?? [])
            return [updated, event === undefined ? written : insertOutboxEvent(written, event, now)[1]] as const
          }
        )
    )
})

/** The job's input in the place of its snapshot's content. */
const inputAsContent = (snapshot: JobSnapshot, job: AiJob) => new JobSnapshot({ ...snapshot, content: job.input })

/**
 * `snapshot-replaced-by-input`: the snapshot a worker reads, with the lock (PREPARE) or on its
 * own (RESOLVE after a takeover), carries the job's input.
 */
export const snapshotAsInput = (
  jobs: AiJobLifecycleRepository["Type"],
  snapshots: SnapshotRepository["Type"]
): { readonly jobs: AiJobLifecycleRepository["Type"]; readonly snapshots: SnapshotRepository["Type"] } => ({
  jobs: {
    ...jobs,
    lockQueued: (...args) =>
      Effect.map(jobs.lockQueued(...args), (answers) =>
        answers.map(Option.map((locked) => ({
          ...locked,
          snapshot: Option.map(locked.snapshot, (snapshot) => inputAsContent(snapshot, locked.job))
        }))))
  },
  snapshots: {
    ...snapshots,
    findByJobId: (jobId) =>
      Effect.flatMap(
        snapshots.findByJobId(jobId),
        (found) =>
          Effect.map(jobs.findById(jobId), (job) =>
            Option.flatMap(found, (snapshot) => Option.map(job, (row) => inputAsContent(snapshot, row))))
      )
  }
})

/** `capacity-released-early`: each permit is released as soon as it is granted, its call still to run. */
export const capacityReleasedEarly = (capacity: ProviderCapacity["Type"]): ProviderCapacity["Type"] => ({
  ...capacity,
  acquire: (request) => Effect.tap(capacity.acquire(request), (permit) => permit.release({ _tag: "Failed" }))
})

/** `cancel-deaf`: a worker whose cancel subscription stays silent and whose beats never report a cancel. */
export const cancelDeaf = (
  jobs: AiJobLifecycleRepository["Type"],
  cancels: CancelSignal["Type"]
): { readonly jobs: AiJobLifecycleRepository["Type"]; readonly cancels: CancelSignal["Type"] } => ({
  jobs: {
    ...jobs,
    extendLocks: (held, lockTtl) =>
      Effect.map(
        jobs.extendLocks(held, lockTtl),
        (beats) => beats.map((beat) => (beat === "CancelRequested" ? "Extended" : beat))
      )
  },
  cancels: { ...cancels, subscribe: Effect.map(cancels.subscribe, Stream.filter(() => false)) }
})

// ---- the bugs the failover fault set proves its invariants on ----

/** `breaker-ignored`: every admission is a plain call, open breaker or not (failures are still recorded). */
export const breakerIgnored = (breaker: ProviderCircuitBreaker["Type"]): ProviderCircuitBreaker["Type"] => ({
  ...breaker,
  admit: () => Effect.succeed({ _tag: "Call" } as const)
})

/** `key-crosses-provider`: each target of a job's route gets the key of the job's own provider. */
export const keyCrossesProvider = (vault: CredentialVault): CredentialVault =>
  CredentialVault.make({
    ...vault,
    resolve: (request) =>
      Effect.map(vault.resolve(request), (credentials) => ({
        ...credentials,
        forProvider: (provider: string) =>
          Option.map(credentials.forProvider(provider), (credential) => ({ ...credential, apiKey: credentials.apiKey }))
      }))
  })

/** `fallbacks-dropped`: a router whose routes keep only their first target. */
export const fallbacksDropped = (router: ModelRouter): ModelRouter =>
  ModelRouter.make({
    route: (request) =>
      Effect.map(router.route(request), ({ fallbacks: _fallbacks, maxWaitMs: _maxWaitMs, ...first }) => first),
    targets: router.targets
  })
