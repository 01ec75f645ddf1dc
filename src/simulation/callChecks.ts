import { HashMap, Redacted } from "effect"
import { canonicalJson } from "../domain/CanonicalJson.js"
import type { CredentialMode } from "../domain/CredentialMode.js"
import type { MemoryTables } from "../layers/memory/MemoryDatabase.js"
import type { ResolvedCredential } from "../services/AiGateway.js"
import { capacityKeyOf } from "../services/ProviderCapacity.js"

/** The invariants about provider calls, cancels and capacity (see `makeCallChecks`). */
export const callInvariantNames = {
  finalRefusal: "no provider call after a credential refusal in the same lease",
  keyOwnProvider:
    "a provider call carries its own provider's key: that provider's platform key, or the job's user key at the user's provider",
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
  readonly provider: string
  /** `provider/model`, the key of the limiter's limits and of the circuit breaker. */
  readonly providerModel: string
  /** The key the call presents (never printed). */
  readonly credential: ResolvedCredential
  /** When the run asked the circuit breaker to let this call through (where the world watches it). */
  readonly admittedAt?: number | undefined
  /** The content the run sent (its snapshot's, as RESOLVE read it). */
  readonly input: unknown
}

/** A user's own key, as it was stored. */
export interface StoredUserKey {
  readonly userId: string
  readonly provider: string
  readonly apiKey: Redacted.Redacted<string>
}

export interface CallChecksOptions {
  /** How many targets a platform-key job's route has (1 when unset). */
  readonly platformRouteTargets?: number | undefined
  /** Each provider's platform key; without them the keys calls carry are not checked. */
  readonly platformKeys?: ReadonlyMap<string, Redacted.Redacted<string>> | undefined
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
const finalCodes = new Set([
  "CREDENTIAL_INVALID",
  "CREDENTIAL_NOT_FOUND",
  "CREDENTIAL_DECRYPT_FAILED",
  "CREDENTIAL_MISSING"
])

const leaseKey = (call: ProviderCall) => `${call.jobId}\u0000${call.leaseNo ?? "-"}`

/** Where the limiter counts a call: the model's platform key, or one user's key of it. */
const capacityKeyOfCall = (call: ProviderCall) =>
  capacityKeyOf(call.providerModel, call.credential.mode === "user_deepseek_key" ? call.credential.credentialId : null)

/**
 * What the monitor checks of provider calls: that a credential refusal is final where the
 * route has nowhere else to go, that each call carries its own provider's key (a key never
 * crosses providers, a user-key job never falls back to a platform key), that the provider gets
 * the snapshot and never the input, that the calls in flight stay within the shared concurrency
 * limit (a user's own key has its own), and that a cancel of a cancellable job stops its calls
 * within `cancelStopMs` (unless the worker was frozen meanwhile: it hears of nothing then).
 */
export const makeCallChecks = (options: CallChecksOptions) => {
  const inFlight = new Set<ProviderCall>()
  /** The users' own keys, by credential id, as the world stored them. */
  const userKeys = new Map<string, StoredUserKey>()
  /** Each job's credential, as created. */
  const jobCredentials = new Map<string, { readonly mode: CredentialMode; readonly credentialId: string | null }>()
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
      `${options.alias(call.jobId)}: a call by ${call.by} in lease ${call.leaseNo ?? "-"} ${what} ${
        now - cancelledAt
      } ms after its cancel ` +
        `(at most ${options.cancelStopMs} ms)`
    )
  }

  /** What is wrong with the key a call carries, if anything (never the key itself). */
  const wrongKey = (
    call: ProviderCall,
    platformKeys: ReadonlyMap<string, Redacted.Redacted<string>>
  ): string | undefined => {
    const { credential } = call
    const job = jobCredentials.get(call.jobId)
    if (credential.provider !== call.provider) return `carried the credential of ${credential.provider}`
    if (job !== undefined && (job.mode !== credential.mode || job.credentialId !== credential.credentialId)) {
      return `carried a ${credential.mode} key for a ${job.mode} job`
    }
    const sameKey = (expected: Redacted.Redacted<string>) =>
      Redacted.value(expected) === Redacted.value(credential.apiKey)
    if (credential.mode === "platform_key") {
      const platform = platformKeys.get(call.provider)
      return platform !== undefined && sameKey(platform)
        ? undefined
        : `carried a platform key that is not ${call.provider}'s`
    }
    const stored = userKeys.get(credential.credentialId ?? "")
    if (stored === undefined || stored.provider !== call.provider) {
      return `carried a user key not stored for ${call.provider}`
    }
    return sameKey(stored.apiKey) ? undefined : "carried a user key other than the one stored"
  }

  const callStarted = (call: ProviderCall) => {
    const name = options.alias(call.jobId)
    if (refused.has(leaseKey(call))) {
      options.fail(
        callInvariantNames.finalRefusal,
        `${name}: a call by ${call.by} in lease ${call.leaseNo ?? "-"} after the provider refused its credential`
      )
    }
    const keyProblem = options.platformKeys === undefined ? undefined : wrongKey(call, options.platformKeys)
    if (keyProblem !== undefined) {
      options.fail(
        callInvariantNames.keyOwnProvider,
        `${name}: a call by ${call.by} to ${call.providerModel} ${keyProblem}`
      )
    }
    const snapshot = snapshots.get(call.jobId)
    if (snapshot !== undefined && canonicalJson(call.input ?? null) !== snapshot) {
      options.fail(
        callInvariantNames.snapshotSent,
        `${name}: a call by ${call.by} sent content that is not the job's snapshot`
      )
    }
    inFlight.add(call)
    const limit = options.concurrencyLimits[call.providerModel]
    // A user's own key has the model's limits to itself, apart from the platform key's.
    const key = capacityKeyOfCall(call)
    const concurrent = Array.from(inFlight).filter((other) => capacityKeyOfCall(other) === key).length
    if (limit !== undefined && concurrent > limit) {
      const whose = key === call.providerModel ? "" : " on one user's key"
      options.fail(
        callInvariantNames.capacityBounded,
        `${concurrent} calls to ${call.providerModel}${whose} in flight at once (limit ${limit}); the last by ${call.by} for ${name}`
      )
    }
    lateForCancel(call, "began")
  }

  const callEnded = (call: ProviderCall, errorCode: string | undefined) => {
    inFlight.delete(call)
    // A platform key refused where the route goes on is the provider's trouble: the engine moves
    // on and may retry it on a later attempt (a user key's route has only the user's provider).
    const routeGoesOn = call.credential.mode === "platform_key" && (options.platformRouteTargets ?? 1) > 1
    if (errorCode !== undefined && finalCodes.has(errorCode) && !routeGoesOn) refused.add(leaseKey(call))
  }

  /** One commit: snapshots written, cancels requested on running jobs, jobs that ended. */
  const committed = (before: MemoryTables, after: MemoryTables) => {
    if (before.aiJobSnapshot !== after.aiJobSnapshot) {
      for (const [id, snapshot] of after.aiJobSnapshot) {
        if (!HashMap.has(before.aiJobSnapshot, id)) {
          snapshots.set(snapshot.jobId, canonicalJson(snapshot.content ?? null))
        }
      }
    }
    if (before.aiJob === after.aiJob) return
    for (const [id, job] of after.aiJob) {
      const previous = HashMap.get(before.aiJob, id)
      if (previous._tag === "None") jobCredentials.set(id, { mode: job.credentialMode, credentialId: job.credentialId })
      if (previous._tag === "None" || previous.value === job) continue
      if (job.lifecycleStatus !== "running") cancels.delete(id)
      else if (
        previous.value.cancelRequestedAt === null && job.cancelRequestedAt !== null &&
        options.cancellable.has(job.jobType)
      ) {
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
    userKeyStored: (credentialId: string, key: StoredUserKey) => {
      userKeys.set(credentialId, key)
    },
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
