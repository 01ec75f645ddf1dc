import { Effect } from "effect"
import type { AiJob } from "../../domain/AiJob.js"
import { newId } from "../../domain/Ids.js"
import { enqueueEventFor } from "../../domain/OutboxEvent.js"
import { payloadFor } from "../../services/JobQueue.js"
import { OutboxRepository } from "../../services/outbox/OutboxRepository.js"
import { OutboxSignal } from "../../services/outbox/OutboxSignal.js"

/** How many of the latest reaper windows' requeues the reaper looks for in the queue. */
const requeueWindowsChecked = 3

/**
 * The queue jobs that may still deliver a queued job: its first one, and the requeues of the
 * last few reaper windows (a requeue's queue job is named by its window, see `requeue`).
 */
export const queueJobIdsOf = (job: AiJob, window: number): ReadonlyArray<string> => {
  const idFor = (redispatchOf?: string) =>
    payloadFor({ jobId: job.id, jobType: job.jobType, createdAt: job.createdAt, redispatchOf }).dedupeKey
  return [idFor(), ...Array.from({ length: requeueWindowsChecked }, (_, back) => idFor(`q${window - back}`))]
}

/**
 * Queues a queued job again whose delivery was lost (the reaper checked that the queue holds
 * none of its queue jobs). The new queue job has an id of its own, named by the reaper's window
 * so a later pass can ask the queue about it; if the first delivery was only slow, the second
 * finds the job taken and is dropped by PREPARE. The dedupe key names the moment the job was
 * looked after: one event per requeue.
 */
export const requeue = (job: AiJob, window: number) =>
  Effect.gen(function*() {
    const outbox = yield* OutboxRepository
    const touchedAt = job.updatedAt.getTime()
    return yield* outbox.createInTransaction(
      enqueueEventFor(job, {
        eventId: yield* newId,
        dedupeKey: `ai.job.requeue:${job.id}:${touchedAt}`,
        redispatchOf: `q${window}`
      })
    )
  })

/**
 * Queues a running job whose worker is gone once more, through the outbox like any enqueue.
 * The dedupe key names the lost lease and the reaper's window (`QUEUED_REDISPATCH_MS` long):
 * a reaper that sees the job again in the same window, or two reapers at once, add no second
 * event, and a redispatch that went astray (its delivery held by a queue that never gives it
 * back) is tried again in the next window. The lost worker's queue job may still be active, so
 * this one gets an id of its own.
 */
export const redispatch = (job: AiJob, window: number) =>
  Effect.gen(function*() {
    const outbox = yield* OutboxRepository
    const signal = yield* OutboxSignal
    const written = yield* outbox.createInTransaction(
      enqueueEventFor(job, {
        eventId: yield* newId,
        dedupeKey: `ai.job.redispatch:${job.id}:${job.leaseNo}:${window}`,
        redispatchOf: `${job.leaseNo}-${window}`
      })
    )
    if (!written.duplicate) yield* signal.notify
    return written
  })
