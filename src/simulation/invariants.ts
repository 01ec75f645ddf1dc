import { Effect, FiberRef, HashMap, Option, type Redacted, Schema } from "effect"
import type { CircuitBreakerSettingsShape } from "../config/CircuitBreakerSettings.js"
import type { AiJob } from "../domain/AiJob.js"
import { finishedEventTypeOf } from "../domain/JobFinishedEvent.js"
import { isAllowedTransition, isTerminal } from "../domain/LifecycleStatus.js"
import { enqueueEventType, EnqueuePayload, type OutboxEvent } from "../domain/OutboxEvent.js"
import type { QueueName } from "../domain/QueueName.js"
import type { MemoryTables } from "../layers/memory/MemoryDatabase.js"
import { payloadFor } from "../services/JobQueue.js"
import type { RouteTarget } from "../services/ModelRouter.js"
import { type CallInvariantName, makeCallChecks, type ProviderCall } from "./callChecks.js"
import { type BreakerStoreWrite, type FailoverInvariantName, makeFailoverChecks } from "./failoverChecks.js"
import type { Trace } from "./trace.js"

/** Who is writing: a simulated process id, or `shared` (clients, reaper, operator). */
export const currentWriter = FiberRef.unsafeMake("shared")

/**
 * One queue delivery handled by a worker, as the monitor sees it: the lease its PREPARE took
 * (recorded from the commit) and the committed tables when it asked for its first transaction,
 * PROJECT's (a worker opens no other).
 */
export interface RunRecord {
  readonly jobId: string
  lease:
    | { readonly jobId: string; readonly owner: string; readonly leaseNo: number; readonly attempt: number }
    | undefined
  projectSaw: MemoryTables | undefined
}

/** The delivery a worker fiber works for (forked fibers share it); unset outside deliveries. */
export const currentRun = FiberRef.unsafeMake<RunRecord | undefined>(undefined)

export const newRunRecord = (jobId: string): RunRecord => ({ jobId, lease: undefined, projectSaw: undefined })

/**
 * The deliveries in progress, by process and job: a grouped commit (or lock) is made in the
 * committer's fiber as its first member's run, so the other jobs it writes are looked up here.
 */
export const activeRuns = new Map<string, RunRecord>()
export const activeRunKey = (writer: string, jobId: string) => `${writer}\u0000${jobId}`

const runOfJob = (run: RunRecord | undefined, writer: string, jobId: string): RunRecord | undefined =>
  run !== undefined && run.jobId === jobId ? run : activeRuns.get(activeRunKey(writer, jobId))

const decodeEnqueuePayload = Schema.decodeUnknownOption(EnqueuePayload)

/** The invariants, by name (the name is what a failing run prints). */
export const invariantNames = {
  legalTransition: "only legal transitions",
  terminalFinal: "a terminal state never changes",
  cancelledNeverSucceeds: "a cancelled job never becomes succeeded",
  createdQueued: "a job is created queued",
  noArtifactsUnlessSucceeded: "no artifact set for a job that did not succeed",
  oneArtifactSet: "at most one artifact set per job",
  succeededHasArtifacts: "a succeeded job has its artifact set",
  oneJobPerKey: "one job per (user, type, idempotency key)",
  attemptsBounded: "attempts never exceed max_attempts",
  outboxNeverLost: "an outbox event is never lost",
  outboxPublishedFinal: "a published outbox event stays published",
  outboxSettled: "every outbox event ends published or dead",
  jobHasEnqueueEvent: "every job has its enqueue event",
  oneTerminalEvent: "a terminal job has exactly one terminal event, of its status; any other job has none",
  leaseHolderEnds: "an outcome is written only by the current lease holder (or the reaper, once the lock expired)",
  newOwnerCounts: "a new owner of a running job costs an attempt (a hand-off costs none)",
  workerLostExhausted: "INTERNAL_WORKER_LOST only when attempts are exhausted",
  cancelBeforeProject: "a cancel requested before PROJECT began never ends succeeded",
  publishedIsQueued: "a published enqueue event has its job in the queue or already locked",
  backoff: "no retry before the larger of its backoff and the provider's Retry-After",
  liveness: "every job reaches a terminal state after a fault-free tail"
} as const
export type InvariantName =
  | (typeof invariantNames)[keyof typeof invariantNames]
  | CallInvariantName
  | FailoverInvariantName

export interface Violation {
  readonly invariant: InvariantName
  readonly detail: string
}

export interface MonitorOptions {
  /** Per job type: the least gap between two provider calls of one lease (the schedule's minimum jittered delay). */
  readonly minRetryGapMs: Readonly<Record<string, number>>
  /** The job types whose definitions say they can be cancelled. */
  readonly cancellable: ReadonlySet<string>
  /** How long past its lock a running job belongs to its worker still (the reaper waits that long). */
  readonly reaperGraceMs: number
  /** The simulated clock, in epoch milliseconds. */
  readonly now: () => number
  readonly trace: Trace
  /** The concurrency limit per `provider/model` the workers share. */
  readonly concurrencyLimits: Readonly<Record<string, number>>
  /** How long after an honoured cancel a run's calls may still go on. */
  readonly cancelStopMs: number
  /** Each provider's platform key; without them the keys calls carry are not checked. */
  readonly platformKeys?: ReadonlyMap<string, Redacted.Redacted<string>> | undefined
  /** Where the world has several providers and watches their breakers (see `failoverChecks.ts`). */
  readonly failover?: {
    readonly breakers: CircuitBreakerSettingsShape
    /** A platform-key job's route: its primary, then its fallbacks. */
    readonly route: ReadonlyArray<RouteTarget>
    /** Each job type's time budget for one attempt. */
    readonly timeoutMs: Readonly<Record<string, number>>
  } | undefined
}

/** What the monitor reads off the queue: the ids of the queue jobs it holds, whatever their state. */
export interface QueueView {
  readonly jobIds: (queueName: QueueName) => Effect.Effect<ReadonlyArray<string>>
}

interface CallEnd {
  readonly at: number
  readonly retryAfterMs: number | undefined
  readonly provider: string
}

/**
 * Watches every commit of the memory database (through its commit observer) and the committed
 * state after every step. It records the first violation; the runner stops there.
 */
export const makeMonitor = (options: MonitorOptions) => {
  const { trace } = options
  let violation: Violation | undefined
  let commits = 0
  /** The commit that wrote each job's projection (artifacts and business rows). */
  const projectionCommit = new Map<string, number>()
  /** The end of the last provider call of each (job, lease), and under `lease\u0000provider` of each (job, lease, provider). */
  const lastCallEnd = new Map<string, CallEnd>()
  /** Where each provider stands in the route (the primary first); one provider: every call a retry. */
  const routeIndex = (provider: string) =>
    Math.max(0, options.failover?.route.findIndex((target) => target.provider === provider) ?? 0)
  /** Each outbox event's job lease number when the event was written. */
  const leaseAtEvent = new Map<string, number>()

  const fail = (invariant: InvariantName, detail: string) => {
    if (violation === undefined) {
      violation = { invariant, detail }
      trace.record("VIOLATION", { invariant, detail })
    }
  }
  const calls = makeCallChecks({
    ...options,
    platformRouteTargets: options.failover?.route.length,
    alias: trace.alias,
    fail
  })
  const failover = options.failover === undefined
    ? undefined
    : makeFailoverChecks({
      ...options.failover,
      settings: options.failover.breakers,
      now: options.now,
      alias: trace.alias,
      fail
    })

  /**
   * A terminal write: a queued job is cancelled by its client; a running one is ended by the run
   * holding its lease, or by the reaper once the lock expired beyond the grace; an ended job
   * has no lease holder, so nobody may write another outcome.
   */
  const checkEndedByHolder = (previous: AiJob, job: AiJob, writer: string, run: RunRecord | undefined) => {
    const name = trace.alias(job.id)
    if (previous.lifecycleStatus === "queued") {
      if (writer !== "shared" || job.lifecycleStatus !== "cancelled") {
        fail(
          invariantNames.leaseHolderEnds,
          `${name}: ended ${job.lifecycleStatus} by ${writer} while queued, without a lease`
        )
      }
      return
    }
    if (isTerminal(previous.lifecycleStatus)) {
      fail(
        invariantNames.leaseHolderEnds,
        `${name}: ${previous.lifecycleStatus} job written ${job.lifecycleStatus} by ${writer}, which holds no lease`
      )
      return
    }
    if (writer === "shared") {
      const expired = previous.lockUntil === null ||
        previous.lockUntil.getTime() < job.updatedAt.getTime() - options.reaperGraceMs
      if (!expired) {
        fail(
          invariantNames.leaseHolderEnds,
          `${name}: ended ${job.lifecycleStatus} by ${writer} while ${
            previous.lockedBy ?? "nobody"
          } held lease ${previous.leaseNo} ` +
            `(lock until ${previous.lockUntil?.toISOString() ?? "none"})`
        )
      }
      return
    }
    const lease = run?.lease
    const holds = lease !== undefined && lease.jobId === job.id && lease.owner === writer &&
      previous.lockedBy === writer &&
      lease.leaseNo === previous.leaseNo && lease.attempt === previous.attemptCount
    if (!holds) {
      fail(
        invariantNames.leaseHolderEnds,
        `${name}: ended ${job.lifecycleStatus} by ${writer} in ${
          lease === undefined ? "no lease" : `lease ${lease.leaseNo} (attempt ${lease.attempt})`
        }` +
          ` while ${previous.lockedBy ?? "nobody"} held lease ${previous.leaseNo} (attempt ${previous.attemptCount})`
      )
    }
  }

  /** A new owner (a lock, a takeover, a pickup after a hand-off) and the attempt it costs. */
  const checkAttemptCounted = (previous: AiJob, job: AiJob, writer: string) => {
    const newOwner = job.lifecycleStatus === "running" && job.lockedBy !== null &&
      (job.lockedBy !== previous.lockedBy || job.leaseNo !== previous.leaseNo)
    const handedOff = previous.lifecycleStatus === "running" && previous.lockedBy === null
    const expected = newOwner && !handedOff ? previous.attemptCount + 1 : previous.attemptCount
    if (job.attemptCount !== expected) {
      const what = !newOwner
        ? "no new owner"
        : handedOff
        ? "a pickup after a hand-off"
        : `${previous.lockedBy ?? "a queued job"} → ${job.lockedBy ?? "?"}`
      fail(
        invariantNames.newOwnerCounts,
        `${
          trace.alias(job.id)
        }: ${what} (by ${writer}) took attempt ${previous.attemptCount} → ${job.attemptCount}; expected ${expected}`
      )
    }
  }

  const jobTransition = (previous: AiJob, job: AiJob, writer: string, committedAs: RunRecord | undefined) => {
    const run = runOfJob(committedAs, writer, job.id)
    const from = previous.lifecycleStatus
    const to = job.lifecycleStatus
    const name = trace.alias(job.id)
    const outcomeWritten = isTerminal(to) &&
      (from !== to || previous.outputHash !== job.outputHash || previous.errorCode !== job.errorCode)
    if (outcomeWritten) checkEndedByHolder(previous, job, writer, run)
    checkAttemptCounted(previous, job, writer)
    // The lease this delivery took, for its later writes.
    if (job.leaseNo !== previous.leaseNo && run !== undefined && job.lockedBy === writer) {
      run.lease = { jobId: job.id, owner: writer, leaseNo: job.leaseNo, attempt: job.attemptCount }
    }
    if (to === "failed" && from !== "failed") failover?.jobFailed(previous, job)
    if (
      to === "failed" && from !== "failed" && job.errorCode === "INTERNAL_WORKER_LOST" &&
      job.attemptCount < job.maxAttempts
    ) {
      fail(
        invariantNames.workerLostExhausted,
        `${name}: failed INTERNAL_WORKER_LOST after ${job.attemptCount} of ${job.maxAttempts} attempts (by ${writer})`
      )
    }
    if (
      to === "succeeded" && from !== "succeeded" && previous.cancelRequestedAt !== null &&
      options.cancellable.has(job.jobType)
    ) {
      // PROJECT began when the run asked for its transaction: was the cancel committed by then?
      const seen = run?.projectSaw === undefined ? Option.none<AiJob>() : HashMap.get(run.projectSaw.aiJob, job.id)
      if (Option.isNone(seen) || seen.value.cancelRequestedAt !== null) {
        fail(
          invariantNames.cancelBeforeProject,
          `${name}: succeeded (by ${writer}) although a cancel was requested at ${previous.cancelRequestedAt.toISOString()}, before its PROJECT began`
        )
      }
    }
    if (from !== to) {
      if (from === "cancelled" && to === "succeeded") {
        fail(invariantNames.cancelledNeverSucceeds, `${name}: cancelled → succeeded (by ${writer})`)
      } else if (isTerminal(from)) {
        fail(invariantNames.terminalFinal, `${name}: ${from} → ${to} (by ${writer})`)
      } else if (!isAllowedTransition(from, to)) {
        fail(invariantNames.legalTransition, `${name}: ${from} → ${to} (by ${writer})`)
      }
    } else if (isTerminal(from) && (previous.outputHash !== job.outputHash || previous.errorCode !== job.errorCode)) {
      fail(invariantNames.terminalFinal, `${name}: its ${from} outcome was rewritten (by ${writer})`)
    }
    const attemptChanged = previous.attemptCount !== job.attemptCount
    if (from !== to || attemptChanged || (previous.cancelRequestedAt === null && job.cancelRequestedAt !== null)) {
      trace.record("job", {
        job: name,
        from,
        to,
        attempt: job.attemptCount,
        owner: job.lockedBy,
        cancel: job.cancelRequestedAt !== null,
        error: job.errorCode,
        by: writer
      })
    }
  }

  const projected = (jobId: string, commit: number, what: string) => {
    const earlier = projectionCommit.get(jobId)
    if (earlier === undefined) projectionCommit.set(jobId, commit)
    else if (earlier !== commit) {
      fail(
        invariantNames.oneArtifactSet,
        `${trace.alias(jobId)}: ${what} written by a second projection (commits ${earlier} and ${commit})`
      )
    }
  }

  /**
   * A provider call begins. Within one lease the calls follow the retry schedule: a retry (a
   * call to the same target as the previous call, or to an earlier one of the route) begins at
   * least the schedule's least delay after the previous call ended, while a call to a later
   * target follows at once, within the attempt; and no call to a provider begins before the
   * Retry-After its previous answer in the lease asked for. A new lease starts afresh.
   */
  const callStarted = (call: ProviderCall) => {
    calls.callStarted(call)
    failover?.callStarted(call)
    if (call.leaseNo === undefined) return
    const lease = `${call.jobId}\u0000${call.leaseNo}`
    const previous = lastCallEnd.get(lease)
    if (previous === undefined) return
    const now = options.now()
    const retry = routeIndex(call.provider) <= routeIndex(previous.provider)
    const backoff = retry ? options.minRetryGapMs[call.jobType] ?? 0 : 0
    const sameProvider = previous.provider === call.provider
      ? previous
      : lastCallEnd.get(`${lease}\u0000${call.provider}`)
    const asked = sameProvider?.retryAfterMs ?? 0
    if (now - previous.at < backoff || (sameProvider !== undefined && now - sameProvider.at < asked)) {
      fail(
        invariantNames.backoff,
        `${trace.alias(call.jobId)}: a call by ${call.by} in lease ${call.leaseNo} began ${
          now - previous.at
        } ms after the previous one ended; ` +
          `the backoff is at least ${backoff} ms${
            asked === 0 ? "" : `, ${call.provider} asked for ${asked} ms (${now - (sameProvider?.at ?? now)} ms ago)`
          }`
      )
    }
  }

  /** A provider call ended (answered, failed or abandoned), with the provider's Retry-After and error code, if any. */
  const callEnded = (call: ProviderCall, retryAfterMs: number | undefined, errorCode: string | undefined) => {
    calls.callEnded(call, errorCode)
    failover?.callEnded(call)
    if (call.leaseNo === undefined) return
    const end = { at: options.now(), retryAfterMs, provider: call.provider }
    lastCallEnd.set(`${call.jobId}\u0000${call.leaseNo}`, end)
    lastCallEnd.set(`${call.jobId}\u0000${call.leaseNo}\u0000${call.provider}`, end)
  }

  /**
   * An enqueue event just published: its queue job is on the queue, or the job needs it no more
   * (a worker locked it since the event was written, it holds a live lock, or it ended).
   */
  const checkPublished = (event: OutboxEvent, tables: MemoryTables, queue: QueueView) =>
    Effect.gen(function*() {
      const payload = decodeEnqueuePayload(event.payload)
      if (Option.isNone(payload)) return
      const job = HashMap.get(tables.aiJob, payload.value.jobId)
      if (Option.isNone(job)) return
      const { lifecycleStatus, leaseNo, lockUntil, lockedBy } = job.value
      const writtenAt = leaseAtEvent.get(event.id) ?? 0
      const liveLock = lifecycleStatus === "running" && lockedBy !== null && lockUntil !== null &&
        lockUntil.getTime() >= options.now()
      if (isTerminal(lifecycleStatus) || leaseNo > writtenAt || liveLock) return
      const queueJobId = payloadFor({
        jobId: payload.value.jobId,
        jobType: payload.value.jobType,
        createdAt: event.createdAt,
        redispatchOf: payload.value.redispatchOf
      }).dedupeKey
      const held = yield* queue.jobIds(payload.value.queueName)
      if (!held.includes(queueJobId)) {
        fail(
          invariantNames.publishedIsQueued,
          `${
            trace.alias(job.value.id)
          }: event ${event.dedupeKey} published, but ${payload.value.queueName} does not hold ${queueJobId}; ` +
            `the job is ${lifecycleStatus} in lease ${leaseNo}, as when the event was written`
        )
      }
    })

  /** The commit observer: diffs the tables before and after one commit, and checks what it published against the queue. */
  const observer = (queue: QueueView) => (before: MemoryTables, after: MemoryTables) =>
    Effect.gen(function*() {
      const writer = yield* FiberRef.get(currentWriter)
      const run = yield* FiberRef.get(currentRun)
      const published = diff(before, after, writer, run)
      calls.committed(before, after)
      for (const event of published) yield* checkPublished(event, after, queue)
    })

  /** Checks one commit; returns the enqueue events it published. */
  const diff = (
    before: MemoryTables,
    after: MemoryTables,
    writer: string,
    run: RunRecord | undefined
  ): ReadonlyArray<OutboxEvent> => {
    const published: Array<OutboxEvent> = []
    commits += 1
    if (before.aiJob !== after.aiJob) {
      for (const [id, job] of after.aiJob) {
        const previous = HashMap.get(before.aiJob, id)
        if (previous._tag === "None") {
          if (job.lifecycleStatus !== "queued") {
            fail(invariantNames.createdQueued, `${trace.alias(id)} was created ${job.lifecycleStatus}`)
          }
          trace.record("job", {
            job: trace.alias(id),
            from: "none",
            to: job.lifecycleStatus,
            type: job.jobType,
            by: writer
          })
        } else if (previous.value !== job) {
          jobTransition(previous.value, job, writer, run)
        }
        if (job.attemptCount > job.maxAttempts) {
          fail(invariantNames.attemptsBounded, `${trace.alias(id)}: attempt ${job.attemptCount} of ${job.maxAttempts}`)
        }
      }
      for (const [id] of before.aiJob) {
        if (!HashMap.has(after.aiJob, id)) {
          fail(invariantNames.terminalFinal, `${trace.alias(id)}: the job row vanished`)
        }
      }
    }
    if (before.aiJobArtifact !== after.aiJobArtifact) {
      for (const [id, row] of after.aiJobArtifact) {
        if (!HashMap.has(before.aiJobArtifact, id)) projected(row.jobId, commits, "an artifact")
      }
    }
    if (before.business !== after.business) {
      for (const [table, rows] of after.business) {
        const earlier = HashMap.get(before.business, table)
        if (earlier._tag === "Some" && earlier.value === rows) continue
        for (const [id, row] of rows) {
          if (earlier._tag === "None" || !HashMap.has(earlier.value, id)) {
            projected(row.job_id, commits, `a ${table} row`)
          }
        }
      }
    }
    if (before.outboxEvent !== after.outboxEvent) {
      for (const [id, event] of after.outboxEvent) {
        if (leaseAtEvent.has(id)) continue
        const job = HashMap.get(after.aiJob, event.aggregateId)
        leaseAtEvent.set(id, Option.isSome(job) ? job.value.leaseNo : 0)
      }
      for (const [id, event] of before.outboxEvent) {
        const next = HashMap.get(after.outboxEvent, id)
        if (next._tag === "None") {
          fail(invariantNames.outboxNeverLost, `event ${event.dedupeKey} vanished`)
          continue
        }
        if (next.value === event) continue
        if (event.status === "published" && next.value.status !== "published") {
          fail(
            invariantNames.outboxPublishedFinal,
            `event for ${trace.alias(event.aggregateId)}: published → ${next.value.status}`
          )
        }
        if (
          event.status !== "published" && next.value.status === "published" && next.value.eventType === enqueueEventType
        ) {
          published.push(next.value)
        }
        if (event.status !== next.value.status && (next.value.status === "published" || next.value.status === "dead")) {
          trace.record("outbox", {
            job: trace.alias(event.aggregateId),
            event: event.lane === "notify"
              ? "terminal"
              : event.dedupeKey.startsWith(enqueueEventType)
              ? "enqueue"
              : "redispatch",
            to: next.value.status,
            by: writer
          })
        }
      }
    }
    if (before.aiUsageLog !== after.aiUsageLog) {
      for (const [id, row] of after.aiUsageLog) {
        if (HashMap.has(before.aiUsageLog, id)) continue
        trace.record("call", {
          job: trace.alias(row.jobId),
          no: row.attemptNo,
          error: row.errorCode,
          by: writer,
          // Which provider answered, where there are several.
          ...(failover === undefined ? {} : { provider: row.provider })
        })
      }
    }
    return published
  }

  /** The committed state, after a step. */
  const checkState = (tables: MemoryTables) => {
    calls.checkState()
    const statusOf = (jobId: string) => {
      const job = HashMap.get(tables.aiJob, jobId)
      return job._tag === "Some" ? job.value.lifecycleStatus : "missing"
    }
    const withArtifacts = new Set<string>()
    for (const row of HashMap.values(tables.aiJobArtifact)) {
      withArtifacts.add(row.jobId)
      const status = statusOf(row.jobId)
      if (status !== "succeeded") {
        fail(
          invariantNames.noArtifactsUnlessSucceeded,
          `${trace.alias(row.jobId)} is ${status} but has artifact ${row.artifactType}`
        )
      }
    }
    for (const [table, rows] of tables.business) {
      for (const row of HashMap.values(rows)) {
        const status = statusOf(row.job_id)
        if (status !== "succeeded") {
          fail(
            invariantNames.noArtifactsUnlessSucceeded,
            `${trace.alias(row.job_id)} is ${status} but has a ${table} row`
          )
        }
      }
    }
    const keys = new Map<string, string>()
    const events = new Set<string>()
    /** Each job's terminal events: its status's commit wrote them, or the write rolled back with them. */
    const terminalEvents = new Map<string, Array<string>>()
    for (const event of HashMap.values(tables.outboxEvent)) {
      events.add(event.dedupeKey)
      if (event.lane === "notify") {
        terminalEvents.set(event.aggregateId, [...(terminalEvents.get(event.aggregateId) ?? []), event.eventType])
      }
    }
    for (const [jobId, types] of terminalEvents) {
      const status = statusOf(jobId)
      const expected = status === "succeeded" || status === "failed" || status === "cancelled"
        ? finishedEventTypeOf[status]
        : undefined
      if (types.length !== 1 || types[0] !== expected) {
        fail(
          invariantNames.oneTerminalEvent,
          `${trace.alias(jobId)} is ${status} with terminal events [${types.join(", ")}]`
        )
      }
    }
    for (const job of HashMap.values(tables.aiJob)) {
      if (job.idempotencyKey !== null) {
        const key = `${job.userId}\u0000${job.jobType}\u0000${job.idempotencyKey}`
        const other = keys.get(key)
        if (other !== undefined) {
          fail(
            invariantNames.oneJobPerKey,
            `${trace.alias(other)} and ${trace.alias(job.id)} share ${job.userId}/${job.jobType}/${job.idempotencyKey}`
          )
        }
        keys.set(key, job.id)
      }
      if (job.attemptCount > job.maxAttempts) {
        fail(
          invariantNames.attemptsBounded,
          `${trace.alias(job.id)}: attempt ${job.attemptCount} of ${job.maxAttempts}`
        )
      }
      if (job.lifecycleStatus === "succeeded" && !withArtifacts.has(job.id)) {
        fail(invariantNames.succeededHasArtifacts, `${trace.alias(job.id)} succeeded without artifacts`)
      }
      if (!events.has(`${enqueueEventType}:${job.id}`)) {
        fail(invariantNames.jobHasEnqueueEvent, `${trace.alias(job.id)} has no enqueue event`)
      }
      if (isTerminal(job.lifecycleStatus) && !terminalEvents.has(job.id)) {
        fail(
          invariantNames.oneTerminalEvent,
          `${trace.alias(job.id)} is ${job.lifecycleStatus} without a terminal event`
        )
      }
    }
  }

  /** At the end of the run: nothing left in flight. */
  const checkSettled = (tables: MemoryTables) => {
    for (const event of HashMap.values(tables.outboxEvent)) {
      if (event.status !== "published" && event.status !== "dead") {
        fail(invariantNames.outboxSettled, `event for ${trace.alias(event.aggregateId)} ended ${event.status}`)
      }
    }
  }

  return {
    observer,
    callStarted,
    callEnded,
    /** A process froze, or runs again (a frozen worker hears of no cancel). */
    processPaused: calls.paused,
    processResumed: calls.resumed,
    /** A user's own key, as the world stored it. */
    userKeyStored: calls.userKeyStored,
    /** A write of the shared breaker store (where the world watches it). */
    breakerWritten: (write: BreakerStoreWrite) => failover?.breakerWritten(write),
    /** A provider goes down, or comes back (how many calls it had meanwhile). */
    providerDown: (provider: string) => failover?.providerDown(provider),
    providerUp: (provider: string) => failover?.providerUp(provider) ?? 0,
    /** The simulated clock, in epoch milliseconds. */
    now: options.now,
    checkState,
    checkSettled,
    fail,
    violation: () => violation,
    commits: () => commits
  }
}

export type Monitor = ReturnType<typeof makeMonitor>
