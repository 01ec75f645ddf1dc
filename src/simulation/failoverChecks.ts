import { Duration, FiberRef } from "effect"
import type { CircuitBreakerSettingsShape } from "../config/CircuitBreakerSettings.js"
import type { AiJob } from "../domain/AiJob.js"
import type { RouteTarget } from "../services/ModelRouter.js"
import { breakerRefreshInterval, type BreakerState } from "../services/ProviderCircuitBreaker.js"
import type { ProviderCall } from "./callChecks.js"

/** How often a process re-reads its breakers, in the epoch milliseconds this checker counts in. */
const breakerRefreshMs = Duration.toMillis(breakerRefreshInterval)

/** The invariants of a world with several providers (see `makeFailoverChecks`). */
export const failoverInvariantNames = {
  outageBounded:
    "calls to a provider whose breaker is open are bounded: once every worker has heard it opened, one probe per cooldown step",
  fallbackTried:
    "a platform-key job fails PROVIDER_UNAVAILABLE after its primary failed only if its backup failed too, was open, or the attempt's time ran out"
} as const
export type FailoverInvariantName = (typeof failoverInvariantNames)[keyof typeof failoverInvariantNames]

/** The last admission a run asked of its circuit breaker: for which `provider/model`, and when. */
export const currentAdmission = FiberRef.unsafeMake<
  { readonly providerModel: string; readonly at: number } | undefined
>(undefined)

/** A write of the shared breaker store, as the world's watch saw it. */
export interface BreakerStoreWrite {
  readonly providerModel: string
  readonly operation: "tryProbe" | "recordFailure" | "recordSuccess" | "abandonProbe"
  readonly from: BreakerState
  readonly to: BreakerState
  /** The store's clock (the caller's `now`). */
  readonly at: number
}

export interface FailoverChecksOptions {
  readonly settings: CircuitBreakerSettingsShape
  /** A platform-key job's route: its primary, then its fallbacks. */
  readonly route: ReadonlyArray<RouteTarget>
  /** Each job type's time budget for one attempt. */
  readonly timeoutMs: Readonly<Record<string, number>>
  readonly now: () => number
  readonly alias: (jobId: string) => string
  readonly fail: (invariant: FailoverInvariantName, detail: string) => void
}

/** A stretch in which one breaker was never closed (open, or half-open with its probe out). */
interface OpenStretch {
  readonly since: number
  /** Calls admitted after every worker must have heard of the opening. */
  late: number
  /** When a probe was given back without a verdict (it may be handed out again at once). */
  readonly probesGivenBack: Array<number>
}

/** How a lease's last call went, for the job's outcome. */
interface LastCall {
  readonly provider: string
  readonly admittedAt: number
  readonly endedAt: number
}

/**
 * What the monitor checks of a world with several providers, from the shared breaker store's own
 * writes (exact: the world watches the one store every worker's breaker uses), the calls the
 * providers got, each with the moment its run asked for admission, and the jobs' outcomes.
 *
 * `outageBounded`. Say the breaker of a `provider/model` opened at T (a failure moved it from
 * closed to open) and has not closed since. A worker admits a call while its own view of the
 * breaker says closed; that view learns of the opening from the store's change message or,
 * should one be lost, from the re-read every `breakerRefreshMs`, so no view says closed after
 * T + `breakerRefreshMs`. A call admitted later is a probe: the store hands one out when the open
 * time has run out (it reopens for at least `openDuration` after each failure), when the probe's lease
 * (`probeLease`) has run out, or at once when a probe is given back unanswered (a run stopped
 * from outside); only a success closes it. So the calls admitted in (T + `breakerRefreshMs`, t]
 * number at most 1 + ⌊(t − T − breakerRefreshMs) / min(openDuration, probeLease)⌋, plus one per
 * probe given back meanwhile.
 *
 * Over one outage of D ms the provider then gets: the calls admitted while its breaker was
 * closed (at most `failures` answered failures per `window` of the outage, since nothing
 * answers in between to reset the count, plus those still in flight or waiting for capacity when
 * it opened), those admitted in the `breakerRefreshMs` after it opened, and the probes above.
 * Only the last part is bounded by the settings alone; it is the part a run that ignores the
 * breaker exceeds, by one call per job for the rest of the outage.
 *
 * `fallbackTried`. EXECUTE walks the route in order and moves on after a PROVIDER_UNAVAILABLE,
 * so when a platform-key job's last call of its final lease went to the primary and the job
 * then failed PROVIDER_UNAVAILABLE, its final attempt stopped before calling the backup: the
 * backup was skipped (a worker's view of its breaker said open, so the store was not closed at
 * some point since `breakerRefreshMs` before that call ended), or that attempt had spent its
 * time budget (the call ended at least `timeoutMs` after its admission). Anything else is a
 * fallback not taken.
 */
export const makeFailoverChecks = (options: FailoverChecksOptions) => {
  const cooldownMs = Math.min(
    Duration.toMillis(options.settings.openDuration),
    Duration.toMillis(options.settings.probeLease)
  )
  const [primary, ...fallbacks] = options.route
  const stretches = new Map<string, OpenStretch>()
  /** When each breaker was last seen not closed (the moment it closed, once it has). */
  const lastOpen = new Map<string, number>()
  const lastCalls = new Map<string, LastCall>()
  /** The providers down now, and the calls each has had since it went down. */
  const outages = new Map<string, number>()

  const breakerWritten = (write: BreakerStoreWrite) => {
    if (write.from !== "closed" || write.to !== "closed") lastOpen.set(write.providerModel, write.at)
    if (write.to === "closed") {
      stretches.delete(write.providerModel)
      return
    }
    let stretch = stretches.get(write.providerModel)
    if (stretch === undefined) {
      stretch = { since: write.at, late: 0, probesGivenBack: [] }
      stretches.set(write.providerModel, stretch)
    }
    if (write.operation === "abandonProbe" && write.from === "half_open") stretch.probesGivenBack.push(write.at)
  }

  const callStarted = (call: ProviderCall) => {
    const during = outages.get(call.provider)
    if (during !== undefined) outages.set(call.provider, during + 1)
    const stretch = stretches.get(call.providerModel)
    if (stretch === undefined) return
    const admittedAt = call.admittedAt ?? options.now()
    const heardBy = stretch.since + breakerRefreshMs
    if (admittedAt <= heardBy) return
    stretch.late += 1
    const givenBack = stretch.probesGivenBack.filter((at) => at <= admittedAt).length
    const allowed = 1 + Math.floor((admittedAt - heardBy) / cooldownMs) + givenBack
    if (stretch.late > allowed) {
      options.fail(
        failoverInvariantNames.outageBounded,
        `${call.providerModel}: ${stretch.late} calls admitted between ${breakerRefreshMs} and ${
          admittedAt - stretch.since
        } ms ` +
          `after its breaker opened, at most ${allowed} (one probe per ${cooldownMs} ms` +
          `${givenBack > 0 ? `, ${givenBack} given back` : ""}); the last by ${call.by} for ${
            options.alias(call.jobId)
          }`
      )
    }
  }

  const callEnded = (call: ProviderCall) => {
    if (call.leaseNo === undefined) return
    lastCalls.set(`${call.jobId}\u0000${call.leaseNo}`, {
      provider: call.provider,
      admittedAt: call.admittedAt ?? options.now(),
      endedAt: options.now()
    })
  }

  /** A job just failed (`previous` is its row before): was its fallback taken? */
  const jobFailed = (previous: AiJob, job: AiJob) => {
    if (job.errorCode !== "PROVIDER_UNAVAILABLE" || job.credentialMode !== "platform_key" || primary === undefined) {
      return
    }
    const last = lastCalls.get(`${job.id}\u0000${previous.leaseNo}`)
    if (last === undefined || last.provider !== primary.provider) return
    const timeoutMs = options.timeoutMs[job.jobType] ?? 0
    if (last.endedAt - last.admittedAt >= timeoutMs) return
    const notTried = fallbacks.filter((target) => {
      const providerModel = `${target.provider}/${target.model}`
      return !stretches.has(providerModel) &&
        (lastOpen.get(providerModel) ?? -Infinity) < last.endedAt - breakerRefreshMs
    })
    if (notTried.length === 0) return
    options.fail(
      failoverInvariantNames.fallbackTried,
      `${
        options.alias(job.id)
      }: failed PROVIDER_UNAVAILABLE in lease ${previous.leaseNo}, its last call to ${primary.provider} ` +
        `${last.endedAt - last.admittedAt} ms after its admission, while ${
          notTried.map((target) => target.provider).join(", ")
        } ` +
        `was closed and never called after it`
    )
  }

  return {
    breakerWritten,
    callStarted,
    callEnded,
    jobFailed,
    providerDown: (provider: string) => {
      outages.set(provider, 0)
    },
    /** The provider is back: how many calls it had while it was down. */
    providerUp: (provider: string) => {
      const calls = outages.get(provider) ?? 0
      outages.delete(provider)
      return calls
    }
  }
}
