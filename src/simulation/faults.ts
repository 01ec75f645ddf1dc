import { Effect, Random } from "effect"

/**
 * Where a worker dies like `kill -9`: its fibers stop there and every write it still attempts
 * is refused. The points are the ones the engine's recovery must cover.
 */
export const crashPoints = [
  /** A delivery arrived; the worker dies before its compare-and-set on the job. */
  "before-lock",
  /** The lock is taken (committed); the worker dies right after. */
  "after-lock",
  /** During EXECUTE, while the provider call is in flight. */
  "mid-execute",
  /** Inside the PROJECT transaction, after the business rows: the transaction must roll back. */
  "inside-project",
  /** The PROJECT transaction committed; the worker dies before the queue acknowledgement. */
  "after-commit",
  /** Wherever the worker is right now. */
  "anywhere"
] as const
export type CrashPoint = (typeof crashPoints)[number]

/** A scripted answer of the synthetic provider (see `SyntheticGatewayControl.script`). */
export type ProviderTrouble =
  | { readonly _tag: "Unavailable" }
  | { readonly _tag: "RateLimited"; readonly retryAfterMs: number }
  | { readonly _tag: "Slow"; readonly ms: number }
  | { readonly _tag: "Hang" }
  | { readonly _tag: "NotJson" }
  /** The provider refuses the key (401): final for the job, never retried. Extended fault set only. */
  | { readonly _tag: "CredentialRejected" }

/** What goes wrong, decided by the seed. */
export type FaultAction =
  /** Arms `point` on the worker in `slot`; it restarts (new id) `restartAfterMs` after dying. */
  | {
    readonly _tag: "CrashWorker"
    readonly at: number
    readonly slot: number
    readonly point: CrashPoint
    readonly restartAfterMs: number
  }
  /** The dispatcher in `slot` dies between its claim and its queue add; restarts later. */
  | { readonly _tag: "CrashDispatcher"; readonly at: number; readonly slot: number; readonly restartAfterMs: number }
  /**
   * The worker in `slot` freezes (GC pause, VM stall) at its next provider call, past its lock,
   * then wakes: a zombie. With `cancelHeldJob`, a client cancels the job it holds meanwhile.
   */
  | {
    readonly _tag: "PauseWorker"
    readonly at: number
    readonly slot: number
    readonly durationMs: number
    readonly cancelHeldJob: boolean
  }
  | { readonly _tag: "Provider"; readonly at: number; readonly trouble: ReadonlyArray<ProviderTrouble> }
  | { readonly _tag: "QueueOutage"; readonly at: number; readonly durationMs: number }
  /** Transient database errors: each read, write or commit fails with probability `rate`. */
  | { readonly _tag: "DatabaseFaults"; readonly at: number; readonly durationMs: number; readonly rate: number }
  /** A second delivery of a job that is already on the queue or done (another queue job id). */
  | { readonly _tag: "DuplicateDelivery"; readonly at: number; readonly pick: number }
  /**
   * The creating process (where it adds its own jobs to the queue) dies between its commit and
   * its queue add, for each of the next `creates` creates: no add, no published mark.
   */
  | { readonly _tag: "CrashCreator"; readonly at: number; readonly creates: number }
  /**
   * The worker in `slot` is asked to stop (SIGTERM): it hands its jobs back and exits, and
   * restarts (new id) `restartAfterMs` later. Extended fault set only.
   */
  | { readonly _tag: "StopWorker"; readonly at: number; readonly slot: number; readonly restartAfterMs: number }
  /**
   * The first worker to begin PROJECT after `at` (output validated, before its transaction)
   * freezes there, after its last heartbeat, for longer than its lease; with `cancelHeldJob`, a
   * client cancels that job meanwhile. Extended fault set only.
   */
  | {
    readonly _tag: "PauseInProject"
    readonly at: number
    readonly durationMs: number
    readonly cancelHeldJob: boolean
  }
  /**
   * `provider` is down for `durationMs`: every call sent to it, and every answer a worker reads
   * from it meanwhile, is PROVIDER_UNAVAILABLE, after `answerMs` (a 503), or at once when
   * `refused` (the connection is refused: nothing was sent). Failover fault set only.
   */
  | {
    readonly _tag: "ProviderOutage"
    readonly at: number
    readonly provider: string
    readonly durationMs: number
    readonly answerMs: number
    readonly refused: boolean
  }

/** Faults applied to every queue add a dispatcher makes, while the fault phase lasts. */
export interface DeliveryFaults {
  /** Chance that an add is delayed by up to `maxDelayMs`. */
  readonly delayRate: number
  readonly maxDelayMs: number
  /** Chance that an add is delivered twice (a second queue job for the same AiJob). */
  readonly duplicateRate: number
}

export interface FaultSettings {
  readonly phaseMs: number
  readonly workers: number
  readonly dispatchers: number
  readonly workerCrashes: number
  readonly dispatcherCrashes: number
  readonly pauses: number
  readonly providerTroubles: number
  readonly queueOutages: number
  readonly databaseFaultWindows: number
  readonly duplicateDeliveries: number
  /** A pause must outlive the lock for the worker to become a zombie. */
  readonly minPauseMs: number
}

export interface FaultPlan {
  readonly actions: ReadonlyArray<FaultAction>
  readonly delivery: DeliveryFaults
}

const troubleOf = Effect.gen(function*() {
  const roll = yield* Random.nextIntBetween(0, 10)
  if (roll < 4) return { _tag: "Unavailable" } satisfies ProviderTrouble
  if (roll < 5) {
    return { _tag: "RateLimited", retryAfterMs: yield* Random.nextIntBetween(500, 6_000) } satisfies ProviderTrouble
  }
  if (roll < 7) return { _tag: "Slow", ms: yield* Random.nextIntBetween(2_000, 20_000) } satisfies ProviderTrouble
  if (roll < 8) return { _tag: "Hang" } satisfies ProviderTrouble
  return { _tag: "NotJson" } satisfies ProviderTrouble
})

/**
 * The faults of one run from the `Random` in context (seed it). Counts are upper bounds: each
 * kind of fault is present in a seed with some probability, so seeds differ in kind as well as
 * in timing, and some seeds are nearly fault-free.
 */
export const generateFaults = (settings: FaultSettings) =>
  Effect.gen(function*() {
    const actions: Array<FaultAction> = []
    const at = Random.nextIntBetween(0, settings.phaseMs)
    const upTo = (max: number) => Random.nextIntBetween(0, max + 1)

    for (let i = yield* upTo(settings.workerCrashes); i > 0; i--) {
      actions.push({
        _tag: "CrashWorker",
        at: yield* at,
        slot: yield* Random.nextIntBetween(0, settings.workers),
        point: crashPoints[yield* Random.nextIntBetween(0, crashPoints.length)]!,
        restartAfterMs: yield* Random.nextIntBetween(1_000, 30_000)
      })
    }
    for (let i = yield* upTo(settings.dispatcherCrashes); i > 0; i--) {
      actions.push({
        _tag: "CrashDispatcher",
        at: yield* at,
        slot: yield* Random.nextIntBetween(0, settings.dispatchers),
        restartAfterMs: yield* Random.nextIntBetween(1_000, 20_000)
      })
    }
    for (let i = yield* upTo(settings.pauses); i > 0; i--) {
      actions.push({
        _tag: "PauseWorker",
        at: yield* at,
        slot: yield* Random.nextIntBetween(0, settings.workers),
        durationMs: settings.minPauseMs + (yield* Random.nextIntBetween(0, 20_000)),
        cancelHeldJob: (yield* Random.next) < 0.5
      })
    }
    for (let i = yield* upTo(settings.providerTroubles); i > 0; i--) {
      const count = yield* Random.nextIntBetween(1, 4)
      const trouble: Array<ProviderTrouble> = []
      for (let k = 0; k < count; k++) trouble.push(yield* troubleOf)
      actions.push({ _tag: "Provider", at: yield* at, trouble })
    }
    for (let i = yield* upTo(settings.queueOutages); i > 0; i--) {
      actions.push({ _tag: "QueueOutage", at: yield* at, durationMs: yield* Random.nextIntBetween(500, 12_000) })
    }
    for (let i = yield* upTo(settings.databaseFaultWindows); i > 0; i--) {
      actions.push({
        _tag: "DatabaseFaults",
        at: yield* at,
        durationMs: yield* Random.nextIntBetween(500, 8_000),
        rate: (yield* Random.nextIntBetween(5, 40)) / 100
      })
    }
    for (let i = yield* upTo(settings.duplicateDeliveries); i > 0; i--) {
      actions.push({ _tag: "DuplicateDelivery", at: yield* at, pick: yield* Random.nextInt })
    }
    const delivery: DeliveryFaults = {
      delayRate: (yield* Random.nextIntBetween(0, 30)) / 100,
      maxDelayMs: yield* Random.nextIntBetween(100, 10_000),
      duplicateRate: (yield* Random.nextIntBetween(0, 20)) / 100
    }
    return { actions, delivery } satisfies FaultPlan
  })

/**
 * The creator's crashes between commit and queue add, from their own `Random` (so the other
 * faults of a seed stay as they were): up to `windows`, each for 1 to 3 creates.
 */
export const generateCreatorCrashes = (settings: { readonly phaseMs: number; readonly windows: number }) =>
  Effect.gen(function*() {
    const actions: Array<FaultAction> = []
    for (let i = yield* Random.nextIntBetween(0, settings.windows + 1); i > 0; i--) {
      actions.push({
        _tag: "CrashCreator",
        at: yield* Random.nextIntBetween(0, settings.phaseMs),
        creates: yield* Random.nextIntBetween(1, 4)
      })
    }
    return actions
  })

/** The faults of the extended set (see `SimulationSettings.extendedFaults`). */
export interface ExtendedFaultSettings {
  readonly phaseMs: number
  readonly workers: number
  /** A pause must outlive the lock for the worker to become a zombie. */
  readonly minPauseMs: number
  /** When bursts of creates arrive (see `generateExtendedWorkload`): hanging calls meet them there. */
  readonly burstsAt: ReadonlyArray<number>
}

/**
 * The extended fault set, from its own `Random` (so the faults of `generateFaults` stay as they
 * were): rolling restarts (each worker stopped in turn, 1 to 2 s apart, as a deploy does, so
 * hand-offs land on workers that are stopping too), a worker frozen in PROJECT, credential
 * refusals, and calls that hang as a burst of creates arrives (the provider's concurrency limit
 * binds).
 */
export const generateExtendedFaults = (settings: ExtendedFaultSettings) =>
  Effect.gen(function*() {
    const actions: Array<FaultAction> = []
    const at = Random.nextIntBetween(0, settings.phaseMs)
    for (let i = yield* Random.nextIntBetween(1, 3); i > 0; i--) {
      let stopAt = yield* at
      for (let slot = 0; slot < settings.workers; slot++) {
        actions.push({ _tag: "StopWorker", at: stopAt, slot, restartAfterMs: yield* Random.nextIntBetween(500, 2_000) })
        stopAt += yield* Random.nextIntBetween(1_000, 2_000)
      }
    }
    if ((yield* Random.next) < 0.8) {
      actions.push({
        _tag: "PauseInProject",
        at: yield* at,
        durationMs: settings.minPauseMs + (yield* Random.nextIntBetween(0, 20_000)),
        cancelHeldJob: (yield* Random.next) < 0.5
      })
    }
    for (let i = yield* Random.nextIntBetween(0, 3); i > 0; i--) {
      const count = yield* Random.nextIntBetween(1, 3)
      actions.push({
        _tag: "Provider",
        at: yield* at,
        trouble: Array.from({ length: count }, () => ({ _tag: "CredentialRejected" as const }))
      })
    }
    for (const burstAt of settings.burstsAt) {
      // Just before the burst, so its first calls are the ones that hang.
      const count = yield* Random.nextIntBetween(4, 8)
      actions.push({
        _tag: "Provider",
        at: Math.max(0, burstAt - 1),
        trouble: Array.from({ length: count }, () => ({ _tag: "Hang" as const }))
      })
    }
    return actions
  })

/** The failover fault set (see `SimulationSettings.failover`). */
export interface FailoverFaultSettings {
  readonly phaseMs: number
  /** The providers of the route, the primary first. */
  readonly providers: readonly [string, ...Array<string>]
}

/**
 * Provider outages, from their own `Random` (so the other fault sets of a seed stay as they
 * were): one or two, mostly of the primary, 5 to 40 s long (longer than the breaker's failure
 * window sometimes), each answering with a 503 after 20-600 ms or refusing the connection.
 */
export const generateFailoverFaults = (settings: FailoverFaultSettings) =>
  Effect.gen(function*() {
    const actions: Array<Extract<FaultAction, { readonly _tag: "ProviderOutage" }>> = []
    const [primary, ...others] = settings.providers
    for (let i = yield* Random.nextIntBetween(1, 3); i > 0; i--) {
      const durationMs = yield* Random.nextIntBetween(5_000, 40_001)
      const refused = (yield* Random.next) < 0.25
      actions.push({
        _tag: "ProviderOutage",
        at: yield* Random.nextIntBetween(0, Math.max(1, settings.phaseMs - durationMs)),
        provider: others.length === 0 || (yield* Random.next) < 0.75
          ? primary
          : others[yield* Random.nextIntBetween(0, others.length)]!,
        durationMs,
        answerMs: refused ? 1 : yield* Random.nextIntBetween(20, 601),
        refused
      })
    }
    return actions
  })
