import { Deferred, type Duration, Effect, Exit, Option } from "effect"
import { type AiJob, leaseOf } from "../domain/AiJob.js"
import { progressAt } from "../domain/JobEvent.js"
import type { JobSnapshot } from "../domain/JobSnapshot.js"
import type { AttemptsExhausted, IllegalTransition, JobLockConflict, JobNotFound } from "../domain/LifecycleErrors.js"
import type { PersistenceError } from "../domain/PersistenceError.js"
import {
  AiJobLifecycleRepository,
  type LockedWithSnapshot,
  type QueuedLockRequest
} from "../services/AiJobLifecycleRepository.js"
import { jobQueueWait, observe, stageDuration, timed } from "../services/EngineMetrics.js"
import { JobDefinitionRegistry, type RegisteredJobType } from "../services/JobDefinitionRegistry.js"
import { jobEventOf, JobEvents } from "../services/JobEvents.js"
import type { AiJobQueuePayload } from "../services/JobQueue.js"
import { SnapshotRepository } from "../services/SnapshotRepository.js"
import { asCaller, type CallerContext, captureCaller, CarriedFiberRefs, makeGroupRunner } from "./groupRunner.js"
import type { PreparedJob } from "./RunningJob.js"
import { stageSpan } from "./stageSpan.js"

const skip = (reason: string) => Effect.as(Effect.logInfo(`delivery skipped: ${reason}`), Option.none<PreparedJob>())

/** Locks one delivery's job if it is still queued: with the other deliveries waiting now, or alone. */
export type LockQueued = (
  request: QueuedLockRequest
) => Effect.Effect<Option.Option<LockedWithSnapshot>, PersistenceError>

/** `LockQueued` for one delivery at a time: a group of one. */
export const lockAlone =
  (jobs: AiJobLifecycleRepository["Type"], workerId: string, lockTtl: Duration.Duration): LockQueued => (request) =>
    Effect.map(
      jobs.lockQueued([request], workerId, lockTtl, progressAt.PREPARE),
      (answers) => answers[0] ?? Option.none()
    )

/** The most deliveries one locking statement takes. */
export const maxLockGroupSize = 64

interface WaitingLock {
  readonly request: QueuedLockRequest
  readonly answer: Deferred.Deferred<Option.Option<LockedWithSnapshot>, PersistenceError>
  readonly caller: CallerContext<never>
}

/**
 * `LockQueued` for a worker's deliveries: one that finds no lock in
 * flight is locked at once, alone; those that arrive while one is in flight are locked together
 * by the next statement. A failed statement fails each of its deliveries, as their own would.
 */
export const makeGroupLock = (workerId: string, lockTtl: Duration.Duration) =>
  Effect.gen(function*() {
    const jobs = yield* AiJobLifecycleRepository
    const carried = yield* CarriedFiberRefs
    const submit = yield* makeGroupRunner<WaitingLock>(
      (group) =>
        asCaller(
          group[0].caller,
          Effect.flatMap(
            Effect.exit(
              jobs.lockQueued(group.map((waiting) => waiting.request), workerId, lockTtl, progressAt.PREPARE)
            ),
            (exit) =>
              Effect.forEach(group, (waiting, index) =>
                Deferred.done(
                  waiting.answer,
                  Exit.map(exit, (answers) => answers[index] ?? Option.none())
                ), { discard: true })
          )
        ),
      maxLockGroupSize
    )
    return ((request) =>
      Effect.gen(function*() {
        const answer = yield* Deferred.make<Option.Option<LockedWithSnapshot>, PersistenceError>()
        yield* submit({ request, answer, caller: yield* captureCaller<never>(carried) })
        return yield* Deferred.await(answer)
      })) satisfies LockQueued
  })

/**
 * PREPARE (docs/architecture.md §8.1): lock the job (`queued → running` in a group, or a takeover
 * of an expired lock) and read its snapshot. Any other state is a duplicate or stale delivery,
 * acknowledged with nothing to do.
 */
export const prepare = Effect.fnUntraced(
  function*(payload: AiJobQueuePayload, workerId: string, lockTtl: Duration.Duration, lockQueued?: LockQueued) {
    const registry = yield* JobDefinitionRegistry
    const jobs = yield* AiJobLifecycleRepository
    const events = yield* JobEvents

    const registered = yield* Effect.option(registry.get(payload.jobType))
    if (Option.isNone(registered)) {
      // A worker of an older release: the job stays queued, and the reaper queues it again after
      // QUEUED_REDISPATCH_MS, for a worker that knows the type.
      yield* Effect.logError("delivery names a job type this worker does not know")
      return Option.none<PreparedJob>()
    }
    // The common case first, a queued job locked and read back with its snapshot; anything else is read and judged below.
    const fast = yield* (lockQueued ?? lockAlone(jobs, workerId, lockTtl))({
      jobId: payload.jobId,
      jobType: payload.jobType
    })
    if (Option.isSome(fast)) {
      return yield* lockedFromQueue(fast.value.job, registered.value, fast.value.snapshot)
    }
    const found = yield* jobs.findById(payload.jobId)
    if (Option.isNone(found)) return yield* skip("no such job")
    const job = found.value
    if (job.jobType !== payload.jobType) return yield* skip("the delivery's job type does not match the job")

    if (job.lifecycleStatus !== "queued" && job.lifecycleStatus !== "running") {
      return yield* skip(`the job is already ${job.lifecycleStatus}`)
    }
    const locked: Effect.Effect<
      AiJob,
      JobNotFound | IllegalTransition | JobLockConflict | AttemptsExhausted | PersistenceError
    > = job.lifecycleStatus === "queued"
      ? jobs.lockJob(job.id, workerId, lockTtl, progressAt.PREPARE)
      : jobs.takeOver(job.id, workerId, lockTtl, progressAt.PREPARE)
    return yield* locked.pipe(
      Effect.flatMap((lockedJob) =>
        Effect.flatMap(snapshotOf(lockedJob), (snapshot) =>
          job.lifecycleStatus === "queued"
            ? lockedFromQueue(lockedJob, registered.value, snapshot)
            : Effect.zipRight(
              events.publish(jobEventOf(lockedJob)),
              logLocked("expired lock taken over", preparedOf(lockedJob, registered.value, snapshot))
            ))
      ),
      Effect.catchTags({
        JobLockConflict: () => skip("another worker holds the job"),
        IllegalTransition: () => skip("the job left the state this delivery expected"),
        AttemptsExhausted: () => skip("the job used every attempt; the reaper ends it"),
        JobNotFound: () => skip("no such job")
      })
    )
  },
  (effect, payload) =>
    Effect.annotateLogs(effect, { stage: "PREPARE", jobId: payload.jobId, jobType: payload.jobType }),
  timed(stageDuration, { stage: "prepare" }),
  stageSpan("pipeline.prepare")
)

/**
 * The snapshot of a job locked without one (a takeover, a lone lock after a lost race). When it
 * cannot be read the lock is released before the delivery goes back, so the next one takes the
 * job at once in the same attempt.
 */
const snapshotOf = (locked: AiJob) =>
  Effect.flatMap(SnapshotRepository, (snapshots) =>
    snapshots.findByJobId(locked.id).pipe(
      Effect.tapError(() => {
        const lease = leaseOf(locked)
        return lease === undefined
          ? Effect.void
          : Effect.ignore(Effect.flatMap(AiJobLifecycleRepository, (jobs) => jobs.releaseLock(lease)))
      })
    ))

const preparedOf = (
  job: AiJob,
  registered: RegisteredJobType,
  snapshot: Option.Option<JobSnapshot>
): Option.Option<PreparedJob> => {
  const lease = leaseOf(job)
  return lease === undefined
    ? Option.none<PreparedJob>()
    : Option.some<PreparedJob>({ job, lease, registered, snapshot })
}

const logLocked = (message: string, prepared: Option.Option<PreparedJob>): Effect.Effect<Option.Option<PreparedJob>> =>
  Option.isSome(prepared)
    ? Effect.as(Effect.logInfo(message).pipe(Effect.annotateLogs({ attempt: prepared.value.lease.attempt })), prepared)
    : Effect.succeed(prepared)

/** A queued job this worker just locked: its job event, its time in the queue, its log line. */
const lockedFromQueue = (job: AiJob, registered: RegisteredJobType, snapshot: Option.Option<JobSnapshot>) =>
  Effect.gen(function*() {
    yield* Effect.flatMap(JobEvents, (events) => events.publish(jobEventOf(job)))
    if (job.startedAt !== null) {
      yield* observe(jobQueueWait, { job_type: job.jobType }, waitSeconds(job.createdAt, job.startedAt))
    }
    return yield* logLocked("job locked", preparedOf(job, registered, snapshot))
  })

/** Creation to first lock, both by the store's clock. */
const waitSeconds = (createdAt: Date, startedAt: Date) => Math.max(0, startedAt.getTime() - createdAt.getTime()) / 1000
