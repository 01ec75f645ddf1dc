import { Effect } from "effect"
import type { AiJob } from "../domain/AiJob.js"
import { newId } from "../domain/Ids.js"
import { aiJobAggregateType, enqueueEventType, type EnqueuePayload } from "../domain/OutboxEvent.js"
import { OutboxRepository } from "../services/OutboxRepository.js"
import { OutboxSignal } from "../services/OutboxSignal.js"

/**
 * Queues a running job whose worker is gone once more, through the outbox like any enqueue.
 * The dedupe key names the attempt that was lost, so a reaper that sees the job again (or two
 * reapers at once) adds no second event for the same attempt.
 */
export const redispatch = (job: AiJob) =>
  Effect.gen(function* () {
    const outbox = yield* OutboxRepository
    const signal = yield* OutboxSignal
    const payload: EnqueuePayload = {
      jobId: job.id,
      jobType: job.jobType,
      queueName: job.queueName,
      priority: job.priority,
      // The lost worker's queue job may still be active; this one needs an id of its own.
      redispatchOf: job.attemptCount
    }
    const written = yield* outbox.createInTransaction({
      id: yield* newId,
      eventType: enqueueEventType,
      aggregateType: aiJobAggregateType,
      aggregateId: job.id,
      dedupeKey: `ai.job.redispatch:${job.id}:${job.attemptCount}`,
      payload,
      delayMs: 0
    })
    if (!written.duplicate) yield* signal.notify
    return written
  })
