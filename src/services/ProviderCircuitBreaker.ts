import { Clock, Context, Data, Duration, Effect, Metric, Schedule, type Scope, Stream } from "effect"
import type { CircuitBreakerSettingsShape } from "../config/CircuitBreakerSettings.js"
import { tagged } from "./EngineMetrics.js"
import { ModelRouter } from "./ModelRouter.js"

/**
 * A circuit breaker per `provider/model`, shared by every process (docs/architecture.md §16.6):
 * after `failures` provider-side failures in a row it opens and calls go straight to the route's
 * next target; once `openDuration` has passed, one call at a time probes the provider, and a
 * success closes it (a failed probe reopens it for twice as long, up to `maxOpenDuration`).
 */

export type BreakerState = "closed" | "open" | "half_open"

/** What the shared store holds for one `provider/model` (a missing record is closed, no failures). */
export interface BreakerRecord {
  readonly state: BreakerState
  /** Provider-side failures in a row (closed), each within the window of the one before. */
  readonly failures: number
  /** Epoch ms until which an open breaker lets nothing through; 0 when closed. */
  readonly openUntil: number
  /** How long the breaker stays open when it opens next after a failed probe. */
  readonly openMs: number
  /** Epoch ms until which a half-open breaker's probe is out; 0 when none is. */
  readonly probeUntil: number
}

export const closedRecord: BreakerRecord = { state: "closed", failures: 0, openUntil: 0, openMs: 0, probeUntil: 0 }

/** A write that moved the breaker, and where from: one log line and one gauge change each. */
export interface BreakerWrite {
  readonly record: BreakerRecord
  readonly from: BreakerState
}

export class BreakerStoreError
  extends Data.TaggedError("BreakerStoreError")<{ readonly operation: string; readonly cause: unknown }>
{}

/** One atomic operation per method, on the caller's Clock (`now`); Redis and memory pass one contract. */
export interface BreakerStore {
  readonly read: (providerModel: string, now: number) => Effect.Effect<BreakerRecord, BreakerStoreError>
  /** A half-open (or open and due) breaker hands out one probe at a time: `probe` says whether this caller got it. */
  readonly tryProbe: (
    providerModel: string,
    now: number,
    probeLease: Duration.Duration
  ) => Effect.Effect<BreakerWrite & { readonly probe: boolean }, BreakerStoreError>
  readonly recordFailure: (
    providerModel: string,
    now: number,
    settings: CircuitBreakerSettingsShape
  ) => Effect.Effect<BreakerWrite, BreakerStoreError>
  /** `sentAt`: when the answered call was sent; an answer to a call sent before the last failure resets nothing. */
  readonly recordSuccess: (
    providerModel: string,
    now: number,
    sentAt: number
  ) => Effect.Effect<BreakerWrite, BreakerStoreError>
  /** The probe ended without a verdict (interrupted): the next caller may probe at once. */
  readonly abandonProbe: (providerModel: string, now: number) => Effect.Effect<BreakerWrite, BreakerStoreError>
  /** The models whose breaker another process changed (pub/sub): each process re-reads them. */
  readonly changes: Stream.Stream<string, never, Scope.Scope>
}

// --- The transitions (the memory store applies these; the Redis scripts do the same in Lua) ---

/** Whether a change to `next` must reach other processes: its state, whether failures are counted, a probe given back. */
export const worthTelling = (before: BreakerRecord, next: BreakerRecord) =>
  before.state !== next.state || (before.failures > 0) !== (next.failures > 0) || next.probeUntil < before.probeUntil

export const probeTransition = (
  record: BreakerRecord,
  now: number,
  probeLease: Duration.Duration
): BreakerRecord & { readonly probe: boolean } => {
  const due = (record.state === "open" && now >= record.openUntil) ||
    (record.state === "half_open" && now >= record.probeUntil)
  return due
    ? { ...record, state: "half_open", probeUntil: now + Duration.toMillis(probeLease), probe: true }
    : { ...record, probe: false }
}

/** `lastFailureAt` is the store's: failures further apart than the window start a new count. */
export const failureTransition = (
  record: BreakerRecord & { readonly lastFailureAt: number },
  now: number,
  settings: CircuitBreakerSettingsShape
): BreakerRecord & { readonly lastFailureAt: number } => {
  const baseOpenMs = Duration.toMillis(settings.openDuration)
  if (record.state === "half_open") {
    const openMs = Math.min(Math.max(record.openMs * 2, baseOpenMs), Duration.toMillis(settings.maxOpenDuration))
    return {
      state: "open",
      failures: record.failures,
      openUntil: now + openMs,
      openMs,
      probeUntil: 0,
      lastFailureAt: now
    }
  }
  // A call sent before the breaker opened may fail after: the breaker is open already.
  if (record.state === "open") return record
  const failures = now - record.lastFailureAt > Duration.toMillis(settings.window) ? 1 : record.failures + 1
  return failures >= settings.failures
    ? {
      state: "open",
      failures,
      openUntil: now + baseOpenMs,
      openMs: baseOpenMs,
      probeUntil: 0,
      lastFailureAt: now
    }
    : { ...record, failures, lastFailureAt: now }
}

/**
 * A success closes a half-open breaker and clears the count of a closed one; an open one waits
 * for its probe. An answer to a call sent before the latest failure says nothing of it: calls in
 * flight when a provider goes down keep answering for a while and must not hold the breaker shut.
 */
export const successTransition = (
  record: BreakerRecord & { readonly lastFailureAt: number },
  sentAt: number
): BreakerRecord =>
  record.state === "open" || (record.state === "closed" && sentAt < record.lastFailureAt) ? record : closedRecord

export const abandonTransition = (record: BreakerRecord): BreakerRecord =>
  record.state === "half_open" ? { ...record, probeUntil: 0 } : record

/** What a call may do: go (closed), go as the one probe (half-open), or skip this target until `retryAt`. */
export type Admission =
  | { readonly _tag: "Call" }
  | { readonly _tag: "Probe" }
  | { readonly _tag: "Skip"; readonly retryAt: number }

/**
 * How a call that was admitted ended, as the breaker counts it: `failure` is the provider's
 * (5xx, a timeout, a refused connection, a body that is no answer); `success` is any answer
 * (a 429 or an output that fails validation still shows the provider is up); `abandoned` is a
 * call stopped from outside before it ended.
 */
export type BreakerOutcome = "success" | "failure" | "abandoned"

export interface BreakerView extends BreakerRecord {
  readonly providerModel: string
}

export class ProviderCircuitBreaker extends Context.Tag("ai-job-engine/ProviderCircuitBreaker")<
  ProviderCircuitBreaker,
  {
    readonly admit: (providerModel: string) => Effect.Effect<Admission>
    /** `sentAt` (epoch ms, default now): when the call was sent, so an answer to an older call resets no newer failure. */
    readonly record: (
      providerModel: string,
      admission: Admission,
      outcome: BreakerOutcome,
      sentAt?: number
    ) => Effect.Effect<void>
    /** As the shared store holds it now (operators, `/metrics`). */
    readonly view: (providerModel: string) => Effect.Effect<BreakerView>
  }
>() {}

export const breakerStateValue: Readonly<Record<BreakerState, number>> = { closed: 0, half_open: 1, open: 2 }

/** 0 closed, 1 half-open, 2 open. */
export const breakerStateGauge = Metric.gauge("ai_provider_circuit_state", {
  description: "Circuit breaker of a provider/model: 0 closed, 1 half-open (probing), 2 open"
})

const labelsOf = (providerModel: string) => {
  const slash = providerModel.indexOf("/")
  return { provider: providerModel.slice(0, slash), model: providerModel.slice(slash + 1) }
}

export const setBreakerGauge = (providerModel: string, state: BreakerState) =>
  Metric.set(tagged(breakerStateGauge, labelsOf(providerModel)), breakerStateValue[state])

/** How often a process re-reads the breakers it uses, in case a change message was lost. */
export const breakerRefreshInterval = Duration.seconds(5)

/**
 * The breaker of one process over a shared `store`, asking the store only when its last record of a
 * model says something may change: a closed breaker without failures costs a call no store operation.
 */
export const makeProviderCircuitBreaker = (store: BreakerStore, settings: CircuitBreakerSettingsShape) =>
  Effect.gen(function*() {
    const known = new Map<string, BreakerRecord>()

    const warn = (error: BreakerStoreError) =>
      Effect.logWarning("circuit breaker store unavailable").pipe(Effect.annotateLogs({ operation: error.operation }))

    const remember = (providerModel: string, record: BreakerRecord) =>
      Effect.suspend(() => {
        const before = known.get(providerModel)
        known.set(providerModel, record)
        return before?.state === record.state ? Effect.void : setBreakerGauge(providerModel, record.state)
      })

    /** One log line per change this process made. */
    const written = (providerModel: string, write: BreakerWrite) =>
      Effect.gen(function*() {
        yield* remember(providerModel, write.record)
        if (write.from === write.record.state) return
        const { model, provider } = labelsOf(providerModel)
        const line = write.record.state === "open"
          ? Effect.logWarning("circuit breaker opened: calls go to the next target")
          : write.record.state === "half_open"
          ? Effect.logInfo("circuit breaker half-open: one call probes the provider")
          : Effect.logInfo("circuit breaker closed: the provider answers again")
        yield* line.pipe(
          Effect.annotateLogs({
            provider,
            model,
            from: write.from,
            to: write.record.state,
            ...(write.record.state === "open"
              ? { openForMs: write.record.openUntil > 0 ? write.record.openMs : 0 }
              : {})
          })
        )
      })

    const reread = (providerModel: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => store.read(providerModel, now)).pipe(
        Effect.flatMap((record) => remember(providerModel, record)),
        Effect.catchAll(warn)
      )

    const current = (providerModel: string) =>
      Effect.suspend(() => {
        const record = known.get(providerModel)
        return record !== undefined
          ? Effect.succeed(record)
          : Effect.zipRight(reread(providerModel), Effect.sync(() => known.get(providerModel) ?? closedRecord))
      })

    yield* store.changes.pipe(Stream.runForEach(reread), Effect.interruptible, Effect.forkScoped)
    yield* Effect.suspend(() => Effect.forEach([...known.keys()], reread, { discard: true })).pipe(
      Effect.repeat(Schedule.spaced(breakerRefreshInterval)),
      Effect.interruptible,
      Effect.forkScoped
    )

    const admit = (providerModel: string): Effect.Effect<Admission> =>
      Effect.gen(function*() {
        const record = yield* current(providerModel)
        if (record.state === "closed") return { _tag: "Call" } as const
        const now = yield* Clock.currentTimeMillis
        if (record.state === "open" && now < record.openUntil) {
          return { _tag: "Skip", retryAt: record.openUntil } as const
        }
        if (record.state === "half_open" && now < record.probeUntil) {
          return { _tag: "Skip", retryAt: record.probeUntil } as const
        }
        const asked = yield* store.tryProbe(providerModel, now, settings.probeLease).pipe(
          Effect.either
        )
        // A store that does not answer must not stop the calls: the provider's own answer decides.
        if (asked._tag === "Left") {
          return yield* Effect.as(warn(asked.left), { _tag: "Call" } as const)
        }
        yield* written(providerModel, asked.right)
        if (asked.right.probe) return { _tag: "Probe" } as const
        const { record: after } = asked.right
        return after.state === "closed"
          ? { _tag: "Call" } as const
          : { _tag: "Skip", retryAt: Math.max(after.openUntil, after.probeUntil, now + 1) } as const
      })

    const record = (
      providerModel: string,
      admission: Admission,
      outcome: BreakerOutcome,
      sentAt?: number
    ): Effect.Effect<void> =>
      Effect.gen(function*() {
        if (admission._tag === "Skip") return
        const now = yield* Clock.currentTimeMillis
        if (outcome === "abandoned") {
          if (admission._tag === "Probe") {
            yield* store.abandonProbe(providerModel, now).pipe(
              Effect.flatMap((write) => written(providerModel, write)),
              Effect.catchAll(warn)
            )
          }
          return
        }
        if (outcome === "failure") {
          return yield* store.recordFailure(providerModel, now, settings).pipe(
            Effect.flatMap((write) => written(providerModel, write)),
            Effect.catchAll(warn)
          )
        }
        // A success matters only where there is something to reset: a probe, or failures counted.
        const seen = known.get(providerModel) ?? closedRecord
        if (admission._tag !== "Probe" && seen.state === "closed" && seen.failures === 0) return
        yield* store.recordSuccess(providerModel, now, sentAt ?? now).pipe(
          Effect.flatMap((write) => written(providerModel, write)),
          Effect.catchAll(warn)
        )
      }).pipe(Effect.uninterruptible)

    const view = (providerModel: string): Effect.Effect<BreakerView> =>
      Effect.zipRight(
        reread(providerModel),
        Effect.sync(() => ({ providerModel, ...(known.get(providerModel) ?? closedRecord) }))
      )

    return ProviderCircuitBreaker.of({ admit, record, view })
  })

/**
 * The breaker of every provider and model `targets` names, as the shared store holds it now, its
 * gauge set on the way (read at scrape time and by the operators' stats).
 */
export const breakerViews = (targets: ReadonlyArray<{ readonly provider: string; readonly model: string }>) =>
  Effect.flatMap(ProviderCircuitBreaker, (breaker) =>
    Effect.forEach(targets, ({ model, provider }) => {
      const providerModel = `${provider}/${model}`
      return Effect.tap(breaker.view(providerModel), (view) => setBreakerGauge(providerModel, view.state))
    }))

/** The gauges of every routed provider's breaker, sampled at scrape time (in any process: the state is shared). */
export const sampleProviderBreakers = Effect.flatMap(ModelRouter, (router) => breakerViews(router.targets)).pipe(
  Effect.asVoid
)
