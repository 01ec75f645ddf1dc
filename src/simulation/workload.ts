import { Effect, Random } from "effect"

/** The job types the simulation drives: every built-in type. */
export const simulatedJobTypes = ["synthetic_echo", "flashcard_generation", "feynman_evaluation"] as const
export type SimulatedJobType = (typeof simulatedJobTypes)[number]

/** The simulation's own job type whose snapshot differs from its input (see `sealedEcho.ts`). */
export const sealedEchoJobTypeName = "synthetic_sealed_echo"

/** What the clients of the engine do, decided by the seed. */
export type WorkloadAction =
  /** `copies` > 1: that many concurrent creates with one idempotency key. */
  | {
    readonly _tag: "Create"
    readonly at: number
    readonly userId: string
    readonly jobType: SimulatedJobType | typeof sealedEchoJobTypeName
    readonly input: unknown
    readonly idempotencyKey: string | null
    readonly copies: number
  }
  /**
   * Cancel, as the HTTP API does: `requestCancel`, then publish the cancel if the job runs.
   * `pick` chooses among the jobs the clients know (a negative one counts from the latest).
   */
  | { readonly _tag: "Cancel"; readonly at: number; readonly pick: number }
  /** An operator's retry: a new job with the same input, quotas off, for a failed or cancelled job. */
  | { readonly _tag: "AdminRetry"; readonly at: number; readonly pick: number }

export interface WorkloadSettings {
  /** Create actions (duplicates and retries come on top). */
  readonly jobs: number
  /** Virtual milliseconds over which the actions are spread. */
  readonly phaseMs: number
  readonly users: number
  readonly cancels: number
  readonly adminRetries: number
  /** Chance that a create carries an idempotency key another create reuses. */
  readonly duplicateRate: number
}

export const defaultWorkloadSettings: WorkloadSettings = {
  jobs: 24,
  phaseMs: 60_000,
  users: 3,
  cancels: 5,
  adminRetries: 3,
  duplicateRate: 0.25
}

const concepts = ["entropy", "osmosis", "inertia", "recursion", "photosynthesis"] as const
const sourceTexts = [
  "Photosynthesis turns light into chemical energy. Chlorophyll absorbs light. Plants release oxygen.",
  "A stack is last in, first out. A queue is first in, first out. Both hold items in order.",
  "Inertia keeps a body in its state of motion. Force changes that state. Mass measures inertia."
] as const

const pickOf = <A>(items: ReadonlyArray<A>) =>
  Effect.map(Random.nextIntBetween(0, items.length), (index) => items[index]!)

const inputFor = (jobType: SimulatedJobType, n: number) =>
  Effect.gen(function*() {
    switch (jobType) {
      case "synthetic_echo":
        return { message: `simulated message ${n}` }
      case "flashcard_generation":
        return {
          sourceText: yield* pickOf(sourceTexts),
          count: yield* Random.nextIntBetween(1, 4),
          deckId: `deck-${yield* Random.nextIntBetween(1, 4)}`
        }
      case "feynman_evaluation": {
        const concept = yield* pickOf(concepts)
        return { concept, explanation: `${concept} explained in plain words, attempt ${n}, with an example.` }
      }
    }
  })

/** The clients' actions, in time order, from the `Random` in context (seed it). */
export const generateWorkload = (settings: WorkloadSettings) =>
  Effect.gen(function*() {
    const actions: Array<WorkloadAction> = []
    const keys: Array<
      { readonly userId: string; readonly jobType: SimulatedJobType; readonly key: string; readonly input: unknown }
    > = []
    for (let n = 1; n <= settings.jobs; n++) {
      const at = yield* Random.nextIntBetween(0, settings.phaseMs)
      const reuse = keys.length > 0 && (yield* Random.next) < settings.duplicateRate
      if (reuse) {
        // The same key again later (a client retrying its request), maybe several at once.
        const earlier = yield* pickOf(keys)
        actions.push({
          _tag: "Create",
          at,
          userId: earlier.userId,
          jobType: earlier.jobType,
          input: earlier.input,
          idempotencyKey: earlier.key,
          copies: yield* Random.nextIntBetween(1, 4)
        })
        continue
      }
      const jobType = yield* pickOf(simulatedJobTypes)
      const userId = `user-${yield* Random.nextIntBetween(1, settings.users + 1)}`
      const input = yield* inputFor(jobType, n)
      const keyed = (yield* Random.next) < 0.6
      const key = keyed ? `key-${n}` : null
      if (key !== null) keys.push({ userId, jobType, key, input })
      actions.push({
        _tag: "Create",
        at,
        userId,
        jobType,
        input,
        idempotencyKey: key,
        copies: key !== null && (yield* Random.next) < settings.duplicateRate ? 2 : 1
      })
    }
    for (let i = 0; i < settings.cancels; i++) {
      actions.push({
        _tag: "Cancel",
        at: yield* Random.nextIntBetween(0, settings.phaseMs),
        pick: yield* Random.nextInt
      })
    }
    for (let i = 0; i < settings.adminRetries; i++) {
      // Later in the phase, when some jobs have failed or been cancelled.
      const at = yield* Random.nextIntBetween(Math.floor(settings.phaseMs / 2), settings.phaseMs)
      actions.push({ _tag: "AdminRetry", at, pick: yield* Random.nextInt })
    }
    return actions
  })

export interface ExtendedWorkloadSettings {
  readonly phaseMs: number
  readonly users: number
}

/**
 * The extended workload (see `SimulationSettings.extendedFaults`), from its own `Random`: one
 * or two bursts of creates at one instant (more runs at once than the provider's concurrency
 * limit allows), cancels of burst jobs a moment later, while they run, and jobs of the sealed
 * echo type, whose snapshot differs from their input.
 */
export const generateExtendedWorkload = (settings: ExtendedWorkloadSettings) =>
  Effect.gen(function*() {
    const actions: Array<WorkloadAction> = []
    const burstsAt: Array<number> = []
    const user = Effect.map(Random.nextIntBetween(1, settings.users + 1), (n) => `user-${n}`)
    for (let burst = yield* Random.nextIntBetween(1, 3); burst > 0; burst--) {
      const at = yield* Random.nextIntBetween(0, Math.floor(settings.phaseMs * 0.8))
      burstsAt.push(at)
      const size = yield* Random.nextIntBetween(5, 10)
      for (let n = 1; n <= size; n++) {
        const jobType = yield* pickOf(simulatedJobTypes)
        actions.push({
          _tag: "Create",
          at,
          userId: yield* user,
          jobType,
          input: yield* inputFor(jobType, 1_000 * burstsAt.length + n),
          idempotencyKey: null,
          copies: 1
        })
      }
      for (let cancels = yield* Random.nextIntBetween(1, 3); cancels > 0; cancels--) {
        actions.push({
          _tag: "Cancel",
          at: at + (yield* Random.nextIntBetween(500, 4_000)),
          pick: -(yield* Random.nextIntBetween(1, size + 1))
        })
      }
    }
    for (let n = yield* Random.nextIntBetween(2, 6); n > 0; n--) {
      actions.push({
        _tag: "Create",
        at: yield* Random.nextIntBetween(0, settings.phaseMs),
        userId: yield* user,
        jobType: sealedEchoJobTypeName,
        input: {
          message: `sealed message ${n}`,
          accessToken: `tok-${yield* Random.nextIntBetween(100_000, 1_000_000)}`
        },
        idempotencyKey: null,
        copies: 1
      })
    }
    return { actions, burstsAt }
  })

/**
 * The failover workload, from its own `Random`: a stream of creates through each provider
 * outage (15 to 35 jobs over its first 80 %), so that a breaker that is not honoured shows in
 * the number of calls the dead provider gets.
 */
export const generateFailoverWorkload = (settings: {
  readonly users: number
  readonly outages: ReadonlyArray<{ readonly at: number; readonly durationMs: number }>
}) =>
  Effect.gen(function*() {
    const actions: Array<WorkloadAction> = []
    for (const [index, outage] of settings.outages.entries()) {
      for (let n = yield* Random.nextIntBetween(15, 36); n > 0; n--) {
        const jobType = yield* pickOf(simulatedJobTypes)
        actions.push({
          _tag: "Create",
          at: outage.at + (yield* Random.nextIntBetween(0, Math.floor(outage.durationMs * 0.8))),
          userId: `user-${yield* Random.nextIntBetween(1, settings.users + 1)}`,
          jobType,
          input: yield* inputFor(jobType, 2_000 * (index + 1) + n),
          idempotencyKey: null,
          copies: 1
        })
      }
    }
    return actions
  })
