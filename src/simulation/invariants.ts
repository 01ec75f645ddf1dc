import { Effect, FiberRef, HashMap } from "effect"
import type { AiJob } from "../domain/AiJob.js"
import { isAllowedTransition, isTerminal } from "../domain/LifecycleStatus.js"
import { enqueueEventType } from "../domain/OutboxEvent.js"
import type { MemoryTables } from "../layers/memory/MemoryDatabase.js"
import type { Trace } from "./trace.js"

/** Who is writing: a simulated process id, or `shared` (clients, reaper, operator). */
export const currentWriter = FiberRef.unsafeMake("shared")

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
  backoff: "no retry before its backoff",
  liveness: "every job reaches a terminal state after a fault-free tail"
} as const
export type InvariantName = (typeof invariantNames)[keyof typeof invariantNames]

export interface Violation {
  readonly invariant: InvariantName
  readonly detail: string
}

export interface MonitorOptions {
  /** Per job type: the least gap between two provider calls of one lease (the schedule's minimum jittered delay). */
  readonly minRetryGapMs: Readonly<Record<string, number>>
  readonly trace: Trace
}

interface UsageMark {
  readonly at: number
  readonly writer: string
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
  /** When each job's lease changed hands (lock or takeover). */
  const leaseChanges = new Map<string, Array<number>>()
  /** Last provider call of each (job, writer). */
  const lastCall = new Map<string, UsageMark>()

  const fail = (invariant: InvariantName, detail: string) => {
    if (violation === undefined) {
      violation = { invariant, detail }
      trace.record("VIOLATION", { invariant, detail })
    }
  }

  const jobTransition = (previous: AiJob, job: AiJob, writer: string) => {
    const from = previous.lifecycleStatus
    const to = job.lifecycleStatus
    const name = trace.alias(job.id)
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
    // A new lease (a takeover, or a pickup after a hand-off, which keeps the attempt) starts a
    // fresh run: its first call owes nothing to the previous run's backoff.
    if (previous.leaseNo !== job.leaseNo) {
      const changes = leaseChanges.get(job.id) ?? []
      changes.push(job.updatedAt.getTime())
      leaseChanges.set(job.id, changes)
    }
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
      fail(invariantNames.oneArtifactSet, `${trace.alias(jobId)}: ${what} written by a second projection (commits ${earlier} and ${commit})`)
    }
  }

  const usage = (jobId: string, jobType: string, at: number, writer: string) => {
    const key = `${jobId}\u0000${writer}`
    const previous = lastCall.get(key)
    lastCall.set(key, { at, writer })
    if (previous === undefined) return
    const takenOver = (leaseChanges.get(jobId) ?? []).some((t) => t >= previous.at && t <= at)
    const minimum = options.minRetryGapMs[jobType] ?? 0
    if (!takenOver && at - previous.at < minimum) {
      fail(
        invariantNames.backoff,
        `${trace.alias(jobId)}: two provider calls by ${writer} ${at - previous.at} ms apart; the backoff is at least ${minimum} ms`
      )
    }
  }

  /** The commit observer: diffs the tables before and after one commit. */
  const observe = (before: MemoryTables, after: MemoryTables) =>
    Effect.flatMap(FiberRef.get(currentWriter), (writer) =>
      Effect.sync(() => {
        commits += 1
        if (before.aiJob !== after.aiJob) {
          for (const [id, job] of after.aiJob) {
            const previous = HashMap.get(before.aiJob, id)
            if (previous._tag === "None") {
              if (job.lifecycleStatus !== "queued") {
                fail(invariantNames.createdQueued, `${trace.alias(id)} was created ${job.lifecycleStatus}`)
              }
              trace.record("job", { job: trace.alias(id), from: "none", to: job.lifecycleStatus, type: job.jobType, by: writer })
            } else if (previous.value !== job) {
              jobTransition(previous.value, job, writer)
            }
            if (job.attemptCount > job.maxAttempts) {
              fail(invariantNames.attemptsBounded, `${trace.alias(id)}: attempt ${job.attemptCount} of ${job.maxAttempts}`)
            }
          }
          for (const [id] of before.aiJob) {
            if (!HashMap.has(after.aiJob, id)) fail(invariantNames.terminalFinal, `${trace.alias(id)}: the job row vanished`)
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
              if (earlier._tag === "None" || !HashMap.has(earlier.value, id)) projected(row.job_id, commits, `a ${table} row`)
            }
          }
        }
        if (before.outboxEvent !== after.outboxEvent) {
          for (const [id, event] of before.outboxEvent) {
            const next = HashMap.get(after.outboxEvent, id)
            if (next._tag === "None") {
              fail(invariantNames.outboxNeverLost, `event ${event.dedupeKey} vanished`)
              continue
            }
            if (next.value === event) continue
            if (event.status === "published" && next.value.status !== "published") {
              fail(invariantNames.outboxPublishedFinal, `event for ${trace.alias(event.aggregateId)}: published → ${next.value.status}`)
            }
            if (event.status !== next.value.status && (next.value.status === "published" || next.value.status === "dead")) {
              trace.record("outbox", {
                job: trace.alias(event.aggregateId),
                event: event.dedupeKey.startsWith(enqueueEventType) ? "enqueue" : "redispatch",
                to: next.value.status,
                by: writer
              })
            }
          }
        }
        if (before.aiUsageLog !== after.aiUsageLog) {
          for (const [id, row] of after.aiUsageLog) {
            if (HashMap.has(before.aiUsageLog, id)) continue
            const job = HashMap.get(after.aiJob, row.jobId)
            trace.record("call", { job: trace.alias(row.jobId), no: row.attemptNo, error: row.errorCode, by: writer })
            if (job._tag === "Some") usage(row.jobId, job.value.jobType, row.createdAt.getTime(), writer)
          }
        }
      })
    )

  /** The committed state, after a step. */
  const checkState = (tables: MemoryTables) => {
    const statusOf = (jobId: string) => {
      const job = HashMap.get(tables.aiJob, jobId)
      return job._tag === "Some" ? job.value.lifecycleStatus : "missing"
    }
    const withArtifacts = new Set<string>()
    for (const row of HashMap.values(tables.aiJobArtifact)) {
      withArtifacts.add(row.jobId)
      const status = statusOf(row.jobId)
      if (status !== "succeeded") {
        fail(invariantNames.noArtifactsUnlessSucceeded, `${trace.alias(row.jobId)} is ${status} but has artifact ${row.artifactType}`)
      }
    }
    for (const [table, rows] of tables.business) {
      for (const row of HashMap.values(rows)) {
        const status = statusOf(row.job_id)
        if (status !== "succeeded") {
          fail(invariantNames.noArtifactsUnlessSucceeded, `${trace.alias(row.job_id)} is ${status} but has a ${table} row`)
        }
      }
    }
    const keys = new Map<string, string>()
    const events = new Set<string>()
    for (const event of HashMap.values(tables.outboxEvent)) events.add(event.dedupeKey)
    for (const job of HashMap.values(tables.aiJob)) {
      if (job.idempotencyKey !== null) {
        const key = `${job.userId}\u0000${job.jobType}\u0000${job.idempotencyKey}`
        const other = keys.get(key)
        if (other !== undefined) {
          fail(invariantNames.oneJobPerKey, `${trace.alias(other)} and ${trace.alias(job.id)} share ${job.userId}/${job.jobType}/${job.idempotencyKey}`)
        }
        keys.set(key, job.id)
      }
      if (job.attemptCount > job.maxAttempts) {
        fail(invariantNames.attemptsBounded, `${trace.alias(job.id)}: attempt ${job.attemptCount} of ${job.maxAttempts}`)
      }
      if (job.lifecycleStatus === "succeeded" && !withArtifacts.has(job.id)) {
        fail(invariantNames.succeededHasArtifacts, `${trace.alias(job.id)} succeeded without artifacts`)
      }
      if (!events.has(`${enqueueEventType}:${job.id}`)) {
        fail(invariantNames.jobHasEnqueueEvent, `${trace.alias(job.id)} has no enqueue event`)
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
    observe,
    checkState,
    checkSettled,
    fail,
    violation: () => violation,
    commits: () => commits
  }
}

export type Monitor = ReturnType<typeof makeMonitor>
