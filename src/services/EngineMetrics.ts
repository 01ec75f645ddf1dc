import { Duration, Effect, Metric, MetricBoundaries, MetricKey, MetricLabel } from "effect"
import type { AiJob } from "../domain/AiJob.js"
import { allOutboxLanes, type OutboxLane } from "../domain/OutboxEvent.js"
import { OutboxRepository } from "./outbox/OutboxRepository.js"

/**
 * The engine's metrics, as Effect `Metric`s in the process's registry; `GET /metrics` renders
 * them as Prometheus text. Label values come from bounded sets only (job types, stages, error
 * codes, providers and models from configuration, route templates): never a job or user id.
 */

/** Seconds: 5 ms .. about 5.5 min, doubling (17 buckets). */
const secondsBuckets = MetricBoundaries.exponential({ start: 0.005, factor: 2, count: 17 })

/** Each metric's key, so a tagged metric can be made from its tagged key (see `tagged`). */
const metricKeys = new WeakMap<object, MetricKey.MetricKey.Untyped>()

const remembered = <M extends object>(key: MetricKey.MetricKey.Untyped, metric: M): M => {
  metricKeys.set(metric, key)
  return metric
}

const counter = (name: string, description: string) => {
  const key = MetricKey.counter(name, { description, incremental: true })
  return remembered(key, Metric.fromMetricKey(key))
}
const seconds = (name: string, description: string) => {
  const key = MetricKey.histogram(name, secondsBuckets, description)
  return remembered(key, Metric.fromMetricKey(key))
}
const gauge = (name: string, description: string) => {
  const key = MetricKey.gauge(name, { description })
  return remembered(key, Metric.fromMetricKey(key))
}

export const jobsCreated = counter("ai_jobs_created_total", "Jobs created, by job type")
export const jobsFinished = counter(
  "ai_jobs_finished_total",
  "Jobs that reached a terminal state, by job type, status and error code (none on success)"
)
export const jobDuration = seconds("ai_job_duration_seconds", "From creation to the terminal state, by job type")
export const jobQueueWait = seconds(
  "ai_job_queue_wait_seconds",
  "From creation to the first lock by a worker, by job type"
)
export const stageDuration = seconds("ai_pipeline_stage_duration_seconds", "One pipeline stage of one run, by stage")
export const engineRetries = counter(
  "ai_engine_retries_total",
  "Provider calls repeated by the engine's retry schedule, by job type and error code"
)

export const providerCallDuration = seconds(
  "ai_provider_call_duration_seconds",
  "One provider call, by provider, model and outcome (ok or the error code)"
)
export const providerTokens = counter(
  "ai_provider_tokens_total",
  "Tokens reported by the provider, by provider, model and direction"
)
export const providerCost = counter(
  "ai_provider_cost_total",
  "Cost of provider calls in the price table's units, by provider and model"
)

export const activeJobs = gauge("ai_worker_active_jobs", "Jobs this worker process is running now")

export const outboxPending = gauge(
  "ai_outbox_pending",
  "Job enqueue events not yet published to their queue (pending or claimed)"
)
export const outboxDead = gauge("ai_outbox_dead", "Job enqueue events that failed for good")
export const outboxOldestPendingAge = gauge(
  "ai_outbox_oldest_pending_age_seconds",
  "Age of the oldest unpublished job enqueue event (0 when none)"
)
export const eventsPending = gauge(
  "ai_events_pending",
  "Job completion events not yet delivered to every target (pending or claimed)"
)
export const eventsDead = gauge("ai_events_dead", "Job completion events whose delivery was given up")
export const eventsOldestPendingAge = gauge(
  "ai_events_oldest_pending_age_seconds",
  "Age of the oldest undelivered job completion event (0 when none)"
)
export const dispatchLatency = seconds(
  "ai_outbox_dispatch_latency_seconds",
  "From the create's commit to the event's publication"
)
export const dispatchedEvents = counter("ai_outbox_published_total", "Outbox events published to the queue")

export const reaperActions = counter("ai_reaper_actions_total", "Reaper actions, by kind")

export const httpRequestDuration = seconds(
  "http_server_request_duration_seconds",
  "HTTP requests, by method, route template and status"
)

export const finishedLabels = (jobType: string, status: string, errorCode: string | null | undefined) =>
  ({ job_type: jobType, status, error_code: errorCode ?? "none" }) as const

/**
 * The tagged metrics made so far, per metric and label set: a tagged metric looks its hook up in
 * the registry (hashing its key) on first use only, so one is made per label set, not per update.
 * Label values come from bounded sets, so this stays small.
 */
const taggedCache = new WeakMap<object, Map<string, unknown>>()

/** Updates `metric` with its labels set: `Metric.update` needs the tags on the metric itself. */
export const tagged = <Type, In, Out>(
  metric: Metric.Metric<Type, In, Out>,
  labels: Readonly<Record<string, string>>
): Metric.Metric<Type, In, Out> => {
  const entries = Object.entries(labels)
  const key = JSON.stringify(entries)
  let byLabels = taggedCache.get(metric)
  if (byLabels === undefined) {
    byLabels = new Map()
    taggedCache.set(metric, byLabels)
  }
  // The map under `metric` only ever holds `metric` tagged, so it has `metric`'s type.
  const cached = byLabels.get(key) as Metric.Metric<Type, In, Out> | undefined
  if (cached !== undefined) return cached
  // `Metric.tagged` adds its labels on every update (a fresh array each time), so its registry
  // lookup, which hashes the key, is never cached; a metric of the tagged key looks it up once.
  const metricKey = metricKeys.get(metric)
  const made = metricKey === undefined
    ? entries.reduce((m, [name, value]) => Metric.tagged(m, name, value), metric)
    : (Metric.fromMetricKey(
      MetricKey.taggedWithLabels(metricKey, entries.map(([name, value]) => MetricLabel.make(name, value)))
    ) as unknown as Metric.Metric<Type, In, Out>)
  byLabels.set(key, made)
  return made
}

export const increment = (metric: Metric.Metric.Counter<number>, labels: Readonly<Record<string, string>>, by = 1) =>
  Metric.incrementBy(tagged(metric, labels), by)

export const observe = (
  metric: Metric.Metric.Histogram<number>,
  labels: Readonly<Record<string, string>>,
  value: number
) => Metric.update(tagged(metric, labels), value)

/** Runs `effect` and records its duration in seconds (Effect's Clock, so TestClock drives it) under `labels`. */
export const timed = (metric: Metric.Metric.Histogram<number>, labels: Readonly<Record<string, string>>) => {
  // Tagged and mapped once: a stage's wrapper runs on every call of the stage.
  const inSeconds = Metric.mapInput(tagged(metric, labels), Duration.toSeconds)
  return <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => Metric.trackDuration(effect, inSeconds)
}

/**
 * Each outbox lane's backlog gauges: `ai_outbox_*` is the job dispatch backlog (the enqueue lane),
 * `ai_events_*` the completion events awaiting delivery (the notify lane).
 */
const backlogGauges: Readonly<
  Record<OutboxLane, Readonly<Record<"pending" | "dead" | "oldestPendingAge", Metric.Metric.Gauge<number>>>>
> = {
  enqueue: { pending: outboxPending, dead: outboxDead, oldestPendingAge: outboxOldestPendingAge },
  notify: { pending: eventsPending, dead: eventsDead, oldestPendingAge: eventsOldestPendingAge }
}

/**
 * Samples each outbox lane's backlog into its gauges (at scrape time: nothing is queried unless
 * someone reads the metrics). `processing` counts as pending: claimed but not yet published.
 */
export const sampleOutboxBacklog = Effect.gen(function*() {
  const outbox = yield* OutboxRepository
  yield* Effect.forEach(allOutboxLanes, (lane) =>
    Effect.flatMap(outbox.backlogOf(lane), (backlog) => {
      const gauges = backlogGauges[lane]
      return Effect.all([
        Metric.set(gauges.pending, backlog.unpublished),
        Metric.set(gauges.dead, backlog.dead),
        Metric.set(gauges.oldestPendingAge, backlog.oldestUnpublishedAgeMs / 1000)
      ], { discard: true })
    }), { concurrency: "unbounded", discard: true })
})

/**
 * A job's last log line and its metrics, once it is terminal: outcome, duration from creation
 * (both times the store's), attempts and error code (docs/architecture.md §20.4).
 */
export const recordFinished = (job: AiJob) =>
  Effect.gen(function*() {
    const finishedAt = job.finishedAt ?? job.updatedAt
    const durationMs = Math.max(0, finishedAt.getTime() - job.createdAt.getTime())
    yield* increment(jobsFinished, finishedLabels(job.jobType, job.lifecycleStatus, job.errorCode))
    yield* observe(jobDuration, { job_type: job.jobType }, durationMs / 1000)
    yield* Effect.logInfo("job finished").pipe(
      Effect.annotateLogs({
        jobId: job.id,
        jobType: job.jobType,
        outcome: job.lifecycleStatus,
        durationMs,
        attempts: job.attemptCount,
        errorCode: job.errorCode ?? "none"
      })
    )
  })
