import { Effect, Either, HashMap, type Scope } from "effect"
import { AiJob } from "../domain/AiJob.js"
import { takeOverGuard } from "../domain/LifecycleGuards.js"
import type { MemoryDatabase } from "../layers/memory/MemoryDatabase.js"
import type { AiJobLifecycleRepository } from "../services/AiJobLifecycleRepository.js"
import { JobDefinitionRegistry, type RegisteredJobType } from "../services/JobDefinitionRegistry.js"
import type { JobQueue } from "../services/JobQueue.js"

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
  "retry-after-ignored"
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
  takeOver: (jobId, workerId, lockTtlMs) =>
    db.write("ai_job.takeOver", (tables, now) =>
      Either.map(takeOverGuard(jobId, HashMap.get(tables.aiJob, jobId), now), (job) => {
        const updated = new AiJob(
          {
            ...job,
            lockedBy: workerId,
            lockedAt: now,
            lockUntil: new Date(now.getTime() + lockTtlMs),
            leaseNo: job.leaseNo + 1,
            updatedAt: now
          },
          { disableValidation: true }
        )
        return [updated, { ...tables, aiJob: HashMap.set(tables.aiJob, jobId, updated) }] as const
      }))
})

/** `reaper-off-by-one`: the reaper's view of expired jobs, each with one attempt fewer allowed. */
export const reaperOffByOne = (jobs: AiJobLifecycleRepository["Type"]): AiJobLifecycleRepository["Type"] => ({
  ...jobs,
  findExpiredLocks: (graceMs, limit) =>
    Effect.map(jobs.findExpiredLocks(graceMs, limit), (expired) =>
      expired.map((job) => new AiJob({ ...job, maxAttempts: job.maxAttempts - 1 }, { disableValidation: true })))
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
