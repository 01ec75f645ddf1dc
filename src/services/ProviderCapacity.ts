import { Context, type Effect, type Scope } from "effect"

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
}

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
 * `acquire` waits until the call may go: it sleeps on the Clock until the earliest instant the
 * limit can let it through (a release in this worker wakes it sooner; one held by another worker
 * is seen within 50 ms), is interruptible, and cannot fail, so waiting never spends a retry attempt. Callers acquire outside
 * any database transaction (waiting must not hold a connection) and keep their lease fresh meanwhile.
 * The permit belongs to the scope: if the scope closes before `release`, the call counts as sent
 * and its slot is freed with the estimate standing (`Failed`).
 *
 * Fairness: a worker grants interactive waiters before background ones, and while any worker has
 * an interactive call waiting, no worker starts a background call. Within a priority a worker
 * serves users in turn (round-robin), not in arrival order. So one user's 200 background jobs delay
 * another user's interactive job only until the next slot frees (one provider round trip when the
 * concurrency limit binds), and another user's background job by one of theirs per turn.
 */
export class ProviderCapacity extends Context.Tag("ai-job-engine/ProviderCapacity")<
  ProviderCapacity,
  {
    readonly acquire: (request: CapacityRequest) => Effect.Effect<CapacityPermit, never, Scope.Scope>
    /** No new call to `providerModel` starts, on any worker, before `untilMs` (epoch ms); a pause only ever extends. */
    readonly pause: (providerModel: string, untilMs: number) => Effect.Effect<void>
    /** An operator's view; dies when the shared store cannot be read. */
    readonly state: (providerModel: string) => Effect.Effect<CapacityState>
  }
>() {}
