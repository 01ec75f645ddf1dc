import { Clock, Duration, Effect, Option } from "effect"
import type { AiJob } from "../../domain/AiJob.js"
import type { OutboxEvent, OutboxStatus } from "../../domain/OutboxEvent.js"
import { allQueueNames } from "../../domain/QueueName.js"
import { AiJobLifecycleRepository } from "../../services/AiJobLifecycleRepository.js"
import { JobQueue } from "../../services/JobQueue.js"
import { JobStatistics } from "../../services/JobStatistics.js"
import { ModelRouter } from "../../services/ModelRouter.js"
import { OutboxRepository } from "../../services/outbox/OutboxRepository.js"
import { breakerViews } from "../../services/ProviderCircuitBreaker.js"
import { UsageLog, type UsageLogRecord } from "../../services/UsageLog.js"
import type { JobCursor } from "../ApiSchemas.js"
import { fromPersistence } from "../errorMapping.js"
import type { OutboxListStatus, TimelineEventKind } from "../OperatorSchemas.js"
import { cursorOf } from "../presenters.js"

const storeStatus: Readonly<Record<OutboxListStatus, OutboxStatus>> = {
  dead: "dead",
  pending: "pending",
  claimed: "processing"
}

export const outboxEventDetail = (event: OutboxEvent) => ({
  eventId: event.id,
  eventType: event.eventType,
  aggregateType: event.aggregateType,
  aggregateId: event.aggregateId,
  status: event.status,
  attemptCount: event.attemptCount,
  availableAt: event.availableAt.toISOString(),
  createdAt: event.createdAt.toISOString(),
  updatedAt: event.updatedAt.toISOString(),
  lockedBy: event.lockedBy ?? undefined,
  lastError: event.lastError ?? undefined
})

/** The nearest-rank percentile of sorted values. */
export const percentile = (sorted: ReadonlyArray<number>, p: number): number | null =>
  sorted.length === 0
    ? null
    : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? null

const hour = Duration.hours(1)
/** More finished jobs than this in an hour are sampled by the first ones; the figures stay indicative. */
const finishedLimit = 100_000
const usageDays = 14

/** The operator's reads: outbox pages, a job's timeline, the statistics page. */
export const makeOperatorViews = Effect.gen(function*() {
  const outbox = yield* OutboxRepository
  const usage = yield* UsageLog
  const statistics = yield* JobStatistics
  const router = yield* ModelRouter
  const queue = yield* JobQueue
  const jobs = yield* AiJobLifecycleRepository

  const outboxPage = (
    params: { readonly status: OutboxListStatus; readonly cursor?: JobCursor | undefined; readonly limit: number }
  ) =>
    Effect.gen(function*() {
      const rows = yield* outbox.listByStatus(storeStatus[params.status], {
        after: params.cursor,
        limit: params.limit + 1
      })
      const items = rows.slice(0, params.limit)
      const last = items[items.length - 1]
      const nextCursor = rows.length > params.limit && last !== undefined ? yield* cursorOf(last) : null
      return { items: items.map(outboxEventDetail), nextCursor }
    }).pipe(Effect.catchTag("PersistenceError", fromPersistence))

  const attemptsOf = (calls: ReadonlyArray<UsageLogRecord>) => {
    const byLease = new Map<number, Array<UsageLogRecord>>()
    for (const call of calls) byLease.set(call.leaseNo, [...(byLease.get(call.leaseNo) ?? []), call])
    return Array.from(byLease.entries()).map(([leaseNo, leaseCalls]) => ({
      leaseNo,
      calls: leaseCalls.map((call) => ({
        callNo: call.attemptNo,
        at: call.createdAt.toISOString(),
        provider: call.provider,
        model: call.model,
        latencyMs: call.latencyMs,
        promptTokens: call.promptTokens,
        completionTokens: call.completionTokens,
        totalTokens: call.totalTokens,
        tokensEstimated: call.usageEstimated === true,
        costMicros: call.costMicros,
        outcome: call.errorCode ?? "OK"
      }))
    }))
  }

  /** What the job row records of its life, and each operator's retry of it, in time order. */
  const eventsOf = (job: AiJob, retries: ReadonlyArray<AiJob>) => {
    const events: Array<{ readonly at: Date; readonly kind: TimelineEventKind; readonly detail?: string }> = [
      {
        at: job.createdAt,
        kind: "created",
        detail: `queue ${job.queueName}, priority ${job.priority}${
          job.retriedFromJobId === null ? "" : `, retry of ${job.retriedFromJobId}`
        }`
      }
    ]
    if (job.startedAt !== null) events.push({ at: job.startedAt, kind: "started" })
    if (job.cancelRequestedAt !== null) events.push({ at: job.cancelRequestedAt, kind: "cancel_requested" })
    if (
      job.finishedAt !== null &&
      (job.lifecycleStatus === "succeeded" || job.lifecycleStatus === "failed" || job.lifecycleStatus === "cancelled")
    ) {
      events.push({
        at: job.finishedAt,
        kind: job.lifecycleStatus,
        ...(job.errorCode === null ? {} : { detail: job.errorCode })
      })
    } else {
      events.push({
        at: job.updatedAt,
        kind: "last_update",
        detail: `${job.lifecycleStatus}, progress ${job.progress}%`
      })
    }
    // After the job's own events, so that a retry in the same millisecond as the end still follows it.
    for (const retry of retries) {
      events.push({ at: retry.createdAt, kind: "retry_requested", detail: `retried as ${retry.id}` })
    }
    return events
      .sort((a, b) => a.at.getTime() - b.at.getTime())
      .map((event) => ({ ...event, at: event.at.toISOString() }))
  }

  /** A job's timeline: its provider calls by lease, its events, and the retries that link it to other jobs. */
  const timelineParts = (job: AiJob) =>
    Effect.all([usage.listByJobId(job.id), jobs.findRetriesOf(job.id)], { concurrency: 2 }).pipe(
      Effect.map(([calls, retries]) => ({
        attempts: attemptsOf(calls),
        events: eventsOf(job, retries),
        retriedFrom: job.retriedFromJobId ?? undefined,
        retriedAs: retries.map((retry) => retry.id)
      })),
      Effect.catchTag("PersistenceError", fromPersistence)
    )

  const stats = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const [jobs, counts, oldest, finished, days] = yield* Effect.all(
      [
        statistics.countsByTypeAndStatus,
        outbox.countByStatus,
        outbox.oldestPendingAgeMs,
        statistics.finishedWithin(hour, finishedLimit),
        statistics.usageByDay(usageDays)
      ],
      { concurrency: 5 }
    ).pipe(Effect.catchTag("PersistenceError", fromPersistence))
    // A queue that does not answer is shown as such; the rest of the page still loads.
    const queues = yield* Effect.forEach(allQueueNames, (queueName) =>
      queue.counts(queueName).pipe(
        Effect.timeout("2 seconds"),
        Effect.map((depth) => ({ queueName, available: true, ...depth })),
        Effect.orElseSucceed(() => ({ queueName, available: false, waiting: 0, active: 0, delayed: 0 }))
      ), { concurrency: "unbounded" })

    // Every routed provider's circuit breaker as every process sees it (the state is shared).
    const breakers = yield* breakerViews(router.targets)

    const perMinute = new Map<string, { minute: string; jobType: string; finished: number }>()
    const durations = new Map<string, Array<number>>()
    for (const job of finished) {
      const minute = new Date(Math.floor(job.finishedAt.getTime() / 60_000) * 60_000).toISOString()
      const key = `${minute} ${job.jobType}`
      perMinute.set(key, { minute, jobType: job.jobType, finished: (perMinute.get(key)?.finished ?? 0) + 1 })
      const list = durations.get(job.jobType) ?? []
      if (job.startedAt !== null) list.push(job.finishedAt.getTime() - job.startedAt.getTime())
      durations.set(job.jobType, list)
    }
    return {
      generatedAt: new Date(now).toISOString(),
      jobs: [...jobs].sort((a, b) =>
        a.jobType.localeCompare(b.jobType) || a.lifecycleStatus.localeCompare(b.lifecycleStatus)
      ),
      queues,
      outbox: { pending: counts.pending, dead: counts.dead, oldestPendingAgeMs: Option.getOrNull(oldest) },
      perMinute: Array.from(perMinute.values()).sort((a, b) =>
        a.minute.localeCompare(b.minute) || a.jobType.localeCompare(b.jobType)
      ),
      durations: Array.from(durations.entries())
        .map(([jobType, values]) => {
          const sorted = [...values].sort((a, b) => a - b)
          return {
            jobType,
            finished: finished.filter((job) => job.jobType === jobType).length,
            p50Ms: percentile(sorted, 50),
            p95Ms: percentile(sorted, 95)
          }
        })
        .sort((a, b) => a.jobType.localeCompare(b.jobType)),
      usageByDay: days,
      providers: breakers.map((view) => {
        const slash = view.providerModel.indexOf("/")
        return {
          provider: view.providerModel.slice(0, slash),
          model: view.providerModel.slice(slash + 1),
          breaker: view.state,
          failures: view.failures,
          openUntil: view.state === "open" ? new Date(view.openUntil).toISOString() : null
        }
      })
    }
  })

  return { outboxPage, timelineParts, stats }
})
