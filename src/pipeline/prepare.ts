import { Data, Effect, Option } from "effect"
import { type AiJob, leaseOf } from "../domain/AiJob.js"
import type {
  AttemptsExhausted,
  IllegalTransition,
  JobLockConflict,
  JobNotFound
} from "../domain/LifecycleErrors.js"
import type { PersistenceError } from "../domain/PersistenceError.js"
import { AiJobLifecycleRepository } from "../services/AiJobLifecycleRepository.js"
import { JobDefinitionRegistry } from "../services/JobDefinitionRegistry.js"
import type { AiJobQueuePayload } from "../services/JobQueue.js"
import type { PreparedJob } from "./RunningJob.js"

class MismatchedDelivery extends Data.TaggedError("MismatchedDelivery") {}

const skip = (reason: string) =>
  Effect.as(Effect.logInfo(`delivery skipped: ${reason}`), Option.none<PreparedJob>())

/**
 * PREPARE (docs/architecture.md §8.1): look the job type up and lock the job, either
 * `queued → running` or by taking over a `running` job whose lock expired (§4.4). Any other
 * state is a duplicate or stale delivery: nothing to do, and the delivery is acknowledged.
 */
export const prepare = Effect.fn("pipeline.prepare")(
  function* (payload: AiJobQueuePayload, workerId: string, lockTtlMs: number) {
    const registry = yield* JobDefinitionRegistry
    const jobs = yield* AiJobLifecycleRepository

    const registered = yield* Effect.option(registry.get(payload.jobType))
    if (Option.isNone(registered)) {
      // A worker of an older release: the job stays queued, and the reaper queues it again after
      // QUEUED_REDISPATCH_MS, for a worker that knows the type.
      yield* Effect.logError("delivery names a job type this worker does not know")
      return Option.none<PreparedJob>()
    }
    // Compare-and-set first: the common delivery (a queued job) costs no read before its lock; a
    // job found running is then taken over if its lock expired or was released.
    let tookOver = false
    const locked: Effect.Effect<AiJob, JobNotFound | IllegalTransition | JobLockConflict | AttemptsExhausted | PersistenceError> =
      jobs.lockJob(payload.jobId, workerId, lockTtlMs).pipe(
        Effect.catchTag("JobLockConflict", () =>
          Effect.suspend(() => {
            tookOver = true
            return jobs.takeOver(payload.jobId, workerId, lockTtlMs)
          }))
      )
    return yield* locked.pipe(
      Effect.flatMap((lockedJob) => {
        // A delivery whose type does not match its job never runs it: the lock goes back at once
        // (no attempt lost to a handed-back lock) and the delivery is acknowledged.
        if (lockedJob.jobType === payload.jobType) return Effect.succeed(lockedJob)
        const lease = leaseOf(lockedJob)
        return Effect.zipRight(
          lease === undefined ? Effect.void : Effect.ignore(jobs.releaseLock(lease)),
          Effect.fail(new MismatchedDelivery())
        )
      }),
      Effect.map((lockedJob) => {
        const lease = leaseOf(lockedJob)
        return lease === undefined
          ? Option.none<PreparedJob>()
          : Option.some<PreparedJob>({ job: lockedJob, lease, registered: registered.value })
      }),
      Effect.tap((prepared) =>
        Option.isSome(prepared)
          ? Effect.logInfo(tookOver ? "expired lock taken over" : "job locked").pipe(
            Effect.annotateLogs({ attempt: prepared.value.lease.attempt })
          )
          : Effect.void
      ),
      Effect.catchTags({
        JobLockConflict: () => skip("another worker holds the job"),
        IllegalTransition: () => skip("the job left the state this delivery expected"),
        AttemptsExhausted: () => skip("the job used every attempt; the reaper ends it"),
        JobNotFound: () => skip("no such job"),
        MismatchedDelivery: () => skip("the delivery's job type does not match the job")
      })
    )
  },
  (effect, payload) => Effect.annotateLogs(effect, { stage: "PREPARE", jobId: payload.jobId, jobType: payload.jobType })
)
