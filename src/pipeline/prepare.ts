import { Effect, Option } from "effect"
import { type AiJob, leaseOf } from "../domain/AiJob.js"
import type {
  AttemptsExhausted,
  IllegalTransition,
  JobLockConflict,
  JobNotFound
} from "../domain/LifecycleErrors.js"
import type { PersistenceError } from "../domain/PersistenceError.js"
import { progressAt } from "../domain/JobEvent.js"
import { AiJobLifecycleRepository } from "../services/AiJobLifecycleRepository.js"
import { jobQueueWait, observe, stageDuration, timed } from "../services/EngineMetrics.js"
import { jobEventOf, JobEvents } from "../services/JobEvents.js"
import { JobDefinitionRegistry, type RegisteredJobType } from "../services/JobDefinitionRegistry.js"
import type { JobSnapshot } from "../domain/JobSnapshot.js"
import type { AiJobQueuePayload } from "../services/JobQueue.js"
import type { PreparedJob } from "./RunningJob.js"

const skip = (reason: string) =>
  Effect.as(Effect.logInfo(`delivery skipped: ${reason}`), Option.none<PreparedJob>())

/**
 * PREPARE (docs/architecture.md §8.1): look the job type up, load the job, and lock it, either
 * `queued → running` or by taking over a `running` job whose lock expired (§4.4). Any other
 * state is a duplicate or stale delivery: nothing to do, and the delivery is acknowledged.
 */
export const prepare = Effect.fn("pipeline.prepare", { captureStackTrace: false })(
  function* (payload: AiJobQueuePayload, workerId: string, lockTtlMs: number, loaded?: Option.Option<AiJob>) {
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
    // No read yet (the payload carried the trace context): the common case first, a queued job
    // locked and read back with its snapshot; anything else is read and judged below.
    if (loaded === undefined) {
      const fast = yield* jobs.lockQueued(payload.jobId, payload.jobType, workerId, lockTtlMs, progressAt.PREPARE)
      if (Option.isSome(fast)) {
        return yield* lockedFromQueue(fast.value.job, registered.value, fast.value.snapshot)
      }
    }
    // The run may have read the job already (for its trace context): one read per delivery.
    const found = loaded ?? (yield* jobs.findById(payload.jobId))
    if (Option.isNone(found)) return yield* skip("no such job")
    const job = found.value
    if (job.jobType !== payload.jobType) return yield* skip("the delivery's job type does not match the job")

    if (job.lifecycleStatus !== "queued" && job.lifecycleStatus !== "running") {
      return yield* skip(`the job is already ${job.lifecycleStatus}`)
    }
    const locked: Effect.Effect<AiJob, JobNotFound | IllegalTransition | JobLockConflict | AttemptsExhausted | PersistenceError> =
      job.lifecycleStatus === "queued"
        ? jobs.lockJob(job.id, workerId, lockTtlMs, progressAt.PREPARE)
        : jobs.takeOver(job.id, workerId, lockTtlMs, progressAt.PREPARE)
    return yield* locked.pipe(
      Effect.flatMap((lockedJob) =>
        job.lifecycleStatus === "queued"
          ? lockedFromQueue(lockedJob, registered.value)
          : Effect.zipRight(
            events.publish(jobEventOf(lockedJob)),
            logLocked("expired lock taken over", preparedOf(lockedJob, registered.value))
          )
      ),
      Effect.catchTags({
        JobLockConflict: () => skip("another worker holds the job"),
        IllegalTransition: () => skip("the job left the state this delivery expected"),
        AttemptsExhausted: () => skip("the job used every attempt; the reaper ends it"),
        JobNotFound: () => skip("no such job")
      })
    )
  },
  (effect, payload) => Effect.annotateLogs(effect, { stage: "PREPARE", jobId: payload.jobId, jobType: payload.jobType }),
  timed(stageDuration, { stage: "prepare" })
)

const preparedOf = (job: AiJob, registered: RegisteredJobType, snapshot?: Option.Option<JobSnapshot>): Option.Option<PreparedJob> => {
  const lease = leaseOf(job)
  return lease === undefined
    ? Option.none<PreparedJob>()
    : Option.some<PreparedJob>({ job, lease, registered, ...(snapshot === undefined ? {} : { snapshot }) })
}

const logLocked = (message: string, prepared: Option.Option<PreparedJob>): Effect.Effect<Option.Option<PreparedJob>> =>
  Option.isSome(prepared)
    ? Effect.as(Effect.logInfo(message).pipe(Effect.annotateLogs({ attempt: prepared.value.lease.attempt })), prepared)
    : Effect.succeed(prepared)

/** A queued job this worker just locked: its job event, its time in the queue, its log line. */
const lockedFromQueue = (job: AiJob, registered: RegisteredJobType, snapshot?: Option.Option<JobSnapshot>) =>
  Effect.gen(function* () {
    yield* Effect.flatMap(JobEvents, (events) => events.publish(jobEventOf(job)))
    if (job.startedAt !== null) yield* observe(jobQueueWait, { job_type: job.jobType }, waitSeconds(job.createdAt, job.startedAt))
    return yield* logLocked("job locked", preparedOf(job, registered, snapshot))
  })

/** Creation to first lock, both by the store's clock. */
const waitSeconds = (createdAt: Date, startedAt: Date) => Math.max(0, startedAt.getTime() - createdAt.getTime()) / 1000
