import { HashMap } from "effect"
import { canonicalJson } from "../domain/CanonicalJson.js"
import type { MemoryTables } from "../layers/memory/MemoryDatabase.js"

/** The invariants about provider calls, cancels and capacity (see `makeCallChecks`). */
export const callInvariantNames = {
  finalRefusal: "no provider call after a credential refusal in the same lease",
  snapshotSent: "the provider is sent the job's snapshot, never its raw input",
  capacityBounded: "provider calls in flight never exceed the model's concurrency limit",
  cancelStops: "an honoured cancel stops its run's provider calls within two heartbeats"
} as const
export type CallInvariantName = (typeof callInvariantNames)[keyof typeof callInvariantNames]

/** A provider call as the simulated gateway saw it (`leaseNo` absent outside a job run). */
export interface ProviderCall {
  readonly jobId: string
  readonly jobType: string
  readonly leaseNo: number | undefined
  /** The process that made it. */
  readonly by: string
  /** `provider/model`, the key of the limiter's limits. */
  readonly providerModel: string
  /** The content the run sent (its snapshot's, as RESOLVE read it). */
  readonly input: unknown
}

export interface CallChecksOptions {
  /** The concurrency limit per `provider/model` the workers share. */
  readonly concurrencyLimits: Readonly<Record<string, number>>
  /** How long after an honoured cancel a run's calls may still go on. */
  readonly cancelStopMs: number
  /** The job types whose definitions say they can be cancelled. */
  readonly cancellable: ReadonlySet<string>
  readonly now: () => number
  readonly alias: (jobId: string) => string
  readonly fail: (invariant: CallInvariantName, detail: string) => void
}

/** Error codes that end a job for good: the engine never calls again for them in that lease. */
const finalCodes = new Set(["CREDENTIAL_INVALID", "CREDENTIAL_NOT_FOUND", "CREDENTIAL_DECRYPT_FAILED", "CREDENTIAL_MISSING"])

const leaseKey = (call: ProviderCall) => `${call.jobId}\u0000${call.leaseNo ?? "-"}`

/**
 * What the monitor checks of provider calls: that a credential refusal is final, that the
 * provider gets the snapshot and never the input, that the calls in flight stay within the
 * shared concurrency limit, and that a cancel of a cancellable job stops its calls within
 * `cancelStopMs` (unless the worker was frozen meanwhile: it hears of nothing then).
 */
export const makeCallChecks = (options: CallChecksOptions) => {
  const inFlight = new Set<ProviderCall>()
  /** Canonical JSON of each job's snapshot content, as committed. */
  const snapshots = new Map<string, string>()
  /** Leases whose call was refused for its credential. */
  const refused = new Set<string>()
  /** Jobs whose honoured cancel was committed while they ran, and when. */
  const cancels = new Map<string, number>()
  /** Each process's pauses: when each began and ended (undefined while it lasts). */
  const pauses = new Map<string, Array<{ readonly from: number; to: number | undefined }>>()

  const pausedBetween = (process: string, from: number, to: number) =>
    (pauses.get(process) ?? []).some((pause) => pause.from <= to && (pause.to === undefined || pause.to >= from))

  const lateForCancel = (call: ProviderCall, what: string) => {
    const cancelledAt = cancels.get(call.jobId)
    if (cancelledAt === undefined) return
    const now = options.now()
    if (now - cancelledAt <= options.cancelStopMs || pausedBetween(call.by, cancelledAt, now)) return
    options.fail(
      callInvariantNames.cancelStops,
      `${options.alias(call.jobId)}: a call by ${call.by} in lease ${call.leaseNo ?? "-"} ${what} ${now - cancelledAt} ms after its cancel ` +
        `(at most ${options.cancelStopMs} ms)`
    )
  }

  const callStarted = (call: ProviderCall) => {
    const name = options.alias(call.jobId)
    if (refused.has(leaseKey(call))) {
      options.fail(callInvariantNames.finalRefusal, `${name}: a call by ${call.by} in lease ${call.leaseNo ?? "-"} after the provider refused its credential`)
    }
    const snapshot = snapshots.get(call.jobId)
    if (snapshot !== undefined && canonicalJson(call.input ?? null) !== snapshot) {
      options.fail(callInvariantNames.snapshotSent, `${name}: a call by ${call.by} sent content that is not the job's snapshot`)
    }
    inFlight.add(call)
    const limit = options.concurrencyLimits[call.providerModel]
    const concurrent = Array.from(inFlight).filter((other) => other.providerModel === call.providerModel).length
    if (limit !== undefined && concurrent > limit) {
      options.fail(callInvariantNames.capacityBounded, `${concurrent} calls to ${call.providerModel} in flight at once (limit ${limit}); the last by ${call.by} for ${name}`)
    }
    lateForCancel(call, "began")
  }

  const callEnded = (call: ProviderCall, errorCode: string | undefined) => {
    inFlight.delete(call)
    if (errorCode !== undefined && finalCodes.has(errorCode)) refused.add(leaseKey(call))
  }

  /** One commit: snapshots written, cancels requested on running jobs, jobs that ended. */
  const committed = (before: MemoryTables, after: MemoryTables) => {
    if (before.aiJobSnapshot !== after.aiJobSnapshot) {
      for (const [id, snapshot] of after.aiJobSnapshot) {
        if (!HashMap.has(before.aiJobSnapshot, id)) snapshots.set(snapshot.jobId, canonicalJson(snapshot.content ?? null))
      }
    }
    if (before.aiJob === after.aiJob) return
    for (const [id, job] of after.aiJob) {
      const previous = HashMap.get(before.aiJob, id)
      if (previous._tag === "None" || previous.value === job) continue
      if (job.lifecycleStatus !== "running") cancels.delete(id)
      else if (previous.value.cancelRequestedAt === null && job.cancelRequestedAt !== null && options.cancellable.has(job.jobType)) {
        cancels.set(id, options.now())
      }
    }
  }

  /** After a step: a call still in flight past its job's cancel. */
  const checkState = () => {
    for (const call of inFlight) lateForCancel(call, "was still in flight")
  }

  return {
    callStarted,
    callEnded,
    committed,
    checkState,
    paused: (process: string) => {
      const list = pauses.get(process) ?? []
      list.push({ from: options.now(), to: undefined })
      pauses.set(process, list)
    },
    resumed: (process: string) => {
      const last = pauses.get(process)?.at(-1)
      if (last !== undefined && last.to === undefined) last.to = options.now()
    }
  }
}
