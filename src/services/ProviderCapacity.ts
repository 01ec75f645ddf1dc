import { Context, Data, type Duration, type Effect, type Scope } from "effect"

/** Interactive calls get capacity before background calls whenever both wait. */
export type CapacityPriority = "interactive" | "background"

export interface CapacityRequest {
  /** `provider/model`, the key of the limits in `AI_RATE_LIMITS`. */
  readonly providerModel: string
  /** Prompt tokens plus the expected completion, counted against `tpm` until the call reports usage. */
  readonly estimatedTokens: number
  readonly priority: CapacityPriority
  /** Waiters of one priority are served round-robin by user. */
  readonly userId: string
  /**
   * The user's own key (`user_model_credential.id`): its calls are counted, paused and adapted
   * apart from the platform key's and every other user's, so one key's 429s throttle only it.
   */
  readonly credentialId?: string | undefined
  /** Give up (`CapacityWaitExceeded`) rather than wait longer than this, for any reason. */
  readonly maxWait?: Duration.Duration | undefined
  /** Give up when a pause (a provider's `Retry-After`) would hold the call longer than this in all. */
  readonly maxPaused?: Duration.Duration | undefined
}

/** The limiter would hold the call past what its request allows; `retryAt` is when it could go, if known. */
export class CapacityWaitExceeded extends Data.TaggedError("CapacityWaitExceeded")<{
  readonly providerModel: string
  /** Epoch ms; undefined when the wait ran out without the store naming an instant. */
  readonly retryAt: number | undefined
  /** The model is paused (the provider asked to wait), not merely at its limits. */
  readonly paused: boolean
}> {}

/** The key a call's capacity is kept under: the model's, or the model's for one user's key. */
export const capacityKeyOf = (providerModel: string, credentialId: string | null | undefined) =>
  credentialId === null || credentialId === undefined ? providerModel : `${providerModel}|key:${credentialId}`

/**
 * How a call ended, as the limiter needs it:
 * - `Succeeded`: additive increase of the adaptive concurrency; `totalTokens` (the provider's
 *   usage) replaces the estimate in the token window.
 * - `Overloaded`: a 429 or a timeout: multiplicative decrease. Pair a 429's `Retry-After` with `pause`.
 * - `Failed`: any other end (an error that says nothing about load): the limit stays.
 * - `NotSent`: the call never reached the provider; its request and tokens leave the window.
 */
export type CapacityOutcome =
  | { readonly _tag: "Succeeded"; readonly totalTokens?: number | undefined }
  | { readonly _tag: "Overloaded"; readonly totalTokens?: number | undefined }
  | { readonly _tag: "Failed"; readonly totalTokens?: number | undefined }
  | { readonly _tag: "NotSent" }

export interface CapacityPermit {
  readonly id: string
  readonly providerModel: string
  readonly estimatedTokens: number
  /** How long this call waited while its model was paused: it counts against the job's time budget. */
  readonly paused?: Duration.Duration
  /** Frees the concurrency slot and reports the outcome; only the first call counts. */
  readonly release: (outcome: CapacityOutcome) => Effect.Effect<void>
}

/** What the limiter holds for one `provider/model` right now (operators and tests). */
export interface CapacityState {
  /** Permits held (by every worker sharing the limiter). */
  readonly inFlight: number
  /** The adaptive concurrency limit; undefined when the model has no `concurrency` limit. */
  readonly concurrencyLimit: number | undefined
  /** Requests granted in the last 60 s. */
  readonly requestsInWindow: number
  /** Tokens counted in the last 60 s (estimates corrected by reported usage). */
  readonly tokensInWindow: number
  /** Epoch ms until which the model is paused; 0 when it is not. */
  readonly pausedUntil: number
  /** Calls waiting in this worker. */
  readonly waiting: number
}

/**
 * Capacity for calls to an AI provider, per `provider/model` and shared by every worker: requests
 * per minute, tokens per minute and concurrent requests (`AI_RATE_LIMITS`), with a concurrency limit
 * that adapts to the provider (AIMD) and pauses that follow its `Retry-After`.
 *
 * `acquire` sleeps on the Clock until the earliest instant the limit can let the call through (a
 * release in this worker wakes it sooner; another worker's is seen within 50 ms), is interruptible,
 * and fails only when a bound the request set (`maxWait`, `maxPaused`) would pass, so waiting
 * never spends a retry attempt by itself. Acquire outside any transaction (waiting must not hold a
 * connection). The permit belongs to the scope: closed before `release`, the call counts as sent
 * and its slot is freed with the estimate standing (`Failed`).
 *
 * Fairness: interactive before background (no worker starts a background call while any worker has
 * an interactive one waiting), and users in turn within a priority, so one user's 200 background
 * jobs delay another's interactive job by one freed slot and another's background job by one per turn.
 */
export class ProviderCapacity extends Context.Tag("ai-job-engine/ProviderCapacity")<
  ProviderCapacity,
  {
    readonly acquire: (request: CapacityRequest) => Effect.Effect<CapacityPermit, CapacityWaitExceeded, Scope.Scope>
    /**
     * No new call to `providerModel` (with `credentialId`, that key's calls only) starts, on any
     * worker, before `untilMs` (epoch ms); a pause only ever extends, and never past a day.
     */
    readonly pause: (providerModel: string, untilMs: number, credentialId?: string | undefined) => Effect.Effect<void>
    /** An operator's view; dies when the shared store cannot be read. */
    readonly state: (providerModel: string, credentialId?: string | undefined) => Effect.Effect<CapacityState>
  }
>() {}
