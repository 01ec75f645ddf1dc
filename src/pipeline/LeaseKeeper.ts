import { DateTime, Deferred, Effect, Exit, Schedule, Stream } from "effect"
import { TimingConfig } from "../config/EngineConfig.js"
import type { JobLease } from "../domain/AiJob.js"
import { progressAt, stageOf } from "../domain/JobEvent.js"
import { AiJobLifecycleRepository, clampProgress, type HeldLease } from "../services/AiJobLifecycleRepository.js"
import { CancelSignal } from "../services/CancelSignal.js"
import { JobEvents } from "../services/JobEvents.js"
import { RunOutcome } from "./RunningJob.js"

/** Why a run was stopped from outside: the outcome COMPLETE records. */
export type StopVerdict = Extract<RunOutcome, { readonly _tag: "CancelRequested" | "LockLost" | "HandedOff" }>

/** The range a job type's own EXECUTE progress moves in: past the call's start, short of its validated output. */
export const executeProgressRange = { min: progressAt.EXECUTE, max: progressAt.VALIDATED - 1 } as const

/** One lease the process holds: a map entry and the run's outcome, nothing that runs on its own. */
interface Held {
  readonly lease: JobLease
  readonly honourCancel: boolean
  /** The run's outcome: the work sets it when it ends, the keeper when it stops the run; the first wins. */
  readonly outcome: Deferred.Deferred<RunOutcome>
  /** What the next beat carries to the row. */
  progress: number
  /** The highest progress a job event announced for this lease. */
  announced: number
  /** The run was told of a cancel: beats no longer look for one. */
  cancelDelivered: boolean
}

/** A run's hold on its lease, for as long as its scope is open. */
export interface LeaseHold {
  /** The run's outcome, decided by the work or by whatever stops it from outside. */
  readonly outcome: Deferred.Deferred<RunOutcome>
  /** Raises the progress the next beat carries (never lowers it; a beat writes it, no write of its own). */
  readonly reach: (progress: number) => Effect.Effect<void>
}

/**
 * The lease keeper of one worker process (docs/architecture.md §4.3): one fenced write per beat
 * extends every lease the process holds, so heartbeats cost one statement, not one per job. A lost
 * lease, a requested cancel or a hand-off stops its run through the run's outcome. A storage error
 * is only logged: the lease outlives a few missed beats, and fencing covers the rest.
 */
export const makeLeaseKeeper = Effect.gen(function*() {
  const jobs = yield* AiJobLifecycleRepository
  const events = yield* JobEvents
  const timing = yield* TimingConfig
  const cancels = yield* CancelSignal
  /** By job id; one process may briefly hold two leases of a job (its own expired lease taken over). */
  const held = new Map<string, Set<Held>>()
  /** Set by a hand-off of everything: a lease held after it is handed back at once. */
  let closing = false

  const stop = (entry: Held, verdict: StopVerdict) => Deferred.succeed(entry.outcome, verdict)

  const announce = (entry: Held, progress: number) => {
    if (progress <= entry.announced) return Effect.void
    entry.announced = progress
    return Effect.flatMap(DateTime.now, (at) =>
      events.publish({
        jobId: entry.lease.jobId,
        lifecycleStatus: "running",
        progress,
        stage: stageOf({ lifecycleStatus: "running", progress }),
        attempt: entry.lease.attempt,
        at
      }))
  }

  const beat = Effect.gen(function*() {
    // A job's entry set is dropped with its last hold, so an empty map is an idle process.
    if (held.size === 0) return
    const entries = Array.from(held.values(), (set) => Array.from(set)).flat()
    const batch = entries.map((entry): HeldLease => ({
      lease: entry.lease,
      progress: clampProgress(entry.progress),
      reportCancel: entry.honourCancel && !entry.cancelDelivered
    }))
    const beats = yield* jobs.extendLocks(batch, timing.jobLockTtl)
    yield* Effect.forEach(entries, (entry, index) => {
      switch (beats[index]) {
        case "Lost":
          return stop(entry, RunOutcome.LockLost())
        case "CancelRequested":
          entry.cancelDelivered = true
          return Effect.zipRight(announce(entry, batch[index]!.progress), stop(entry, RunOutcome.CancelRequested()))
        default:
          return announce(entry, batch[index]!.progress)
      }
    }, { discard: true })
  }).pipe(
    Effect.catchTag(
      "PersistenceError",
      (error) =>
        Effect.logWarning("lease beat could not extend the locks").pipe(
          Effect.annotateLogs({ operation: error.operation, reason: error.message })
        )
    ),
    Effect.annotateLogs({ stage: "HEARTBEAT" })
  )
  yield* Effect.forkScoped(Effect.schedule(beat, Schedule.spaced(timing.jobHeartbeatInterval)))

  // One subscription for the process; a cancel for a job it does not hold is someone else's.
  const requests = yield* cancels.subscribe
  yield* Effect.forkScoped(Stream.runForEach(requests, (jobId) =>
    Effect.forEach(held.get(jobId) ?? [], (entry) => {
      if (!entry.honourCancel) return Effect.void
      entry.cancelDelivered = true
      return stop(entry, RunOutcome.CancelRequested())
    }, { discard: true })))

  /** Holds `lease` until the scope closes; the lock wrote `progress`, and its event announced it. */
  const hold = (lease: JobLease, options: { readonly progress: number; readonly honourCancel: boolean }) =>
    Effect.acquireRelease(
      Effect.map(Deferred.make<RunOutcome>(), (outcome) => {
        const entry: Held = {
          lease,
          honourCancel: options.honourCancel,
          outcome,
          progress: options.progress,
          announced: options.progress,
          cancelDelivered: false
        }
        const set = held.get(lease.jobId) ?? new Set<Held>()
        set.add(entry)
        held.set(lease.jobId, set)
        if (closing) Deferred.unsafeDone(outcome, Exit.succeed(RunOutcome.HandedOff()))
        return entry
      }),
      (entry) =>
        Effect.sync(() => {
          const set = held.get(lease.jobId)
          set?.delete(entry)
          if (set?.size === 0) held.delete(lease.jobId)
        })
    ).pipe(
      Effect.map((entry): LeaseHold => ({
        outcome: entry.outcome,
        reach: (progress) =>
          Effect.sync(() => {
            entry.progress = Math.max(entry.progress, progress)
          })
      }))
    )

  /** Stops every held run, and any that takes a lease later, with a hand-off (graceful shutdown). */
  const handOffAll = Effect.suspend(() => {
    closing = true
    return Effect.forEach(
      Array.from(held.values(), (set) => Array.from(set)).flat(),
      (entry) => stop(entry, RunOutcome.HandedOff()),
      { discard: true }
    )
  })

  return { hold, handOffAll }
})

export type LeaseKeeper = Effect.Effect.Success<typeof makeLeaseKeeper>
