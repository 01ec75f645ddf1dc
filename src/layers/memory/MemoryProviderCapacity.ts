import { Context, Duration, Effect, Layer } from "effect"
import { ProviderLimitsConfig } from "../../config/ProviderLimitsConfig.js"
import { ProviderCapacity } from "../../services/ProviderCapacity.js"
import {
  aimdDecreaseCooldownMs,
  aimdDecreaseFactor,
  aimdIncrease,
  capacityPaceMs,
  capacityPollMs,
  type CapacityStore,
  capacityWindowMs,
  interactiveMarkGraceMs,
  makeProviderCapacity,
  maxPauseMs,
  paceLimitOf,
  type ProviderCapacityOptions,
  type StoreLimits,
  type StoreState,
  type TryAcquireResult
} from "../../services/ProviderCapacityRoom.js"

interface Entry {
  readonly id: string
  readonly at: number
  tokens: number
}

interface ModelState {
  /** Grants of the last window, oldest first. */
  log: Array<Entry>
  tokens: number
  readonly held: Map<string, number>
  limit: number | undefined
  lastDecrease: number
  pausedUntil: number
  readonly marks: Map<string, number>
}

/**
 * The memory twin of the Redis capacity store: the same rules as its Lua scripts, one synchronous
 * step per operation (so each is atomic), on the caller's Clock. Several workers of a simulation
 * share one store, as workers share one Redis.
 */
export const makeMemoryCapacityStore = (): CapacityStore => {
  const models = new Map<string, ModelState>()

  const modelFor = (providerModel: string): ModelState => {
    const existing = models.get(providerModel)
    if (existing !== undefined) return existing
    const created: ModelState = {
      log: [],
      tokens: 0,
      held: new Map(),
      limit: undefined,
      lastDecrease: -Infinity,
      pausedUntil: 0,
      marks: new Map()
    }
    models.set(providerModel, created)
    return created
  }

  const prune = (model: ModelState, now: number) => {
    let expired = 0
    while (expired < model.log.length && (model.log[expired]?.at ?? Infinity) <= now - capacityWindowMs) {
      model.tokens -= model.log[expired]?.tokens ?? 0
      expired++
    }
    if (expired > 0) model.log = model.log.slice(expired)
    for (const [id, until] of model.held) if (until <= now) model.held.delete(id)
    for (const [worker, until] of model.marks) if (until <= now) model.marks.delete(worker)
  }

  const limitOf = (model: ModelState, limits: StoreLimits) =>
    limits.ceiling === undefined
      ? undefined
      : Math.max(limits.floor, Math.min(model.limit ?? limits.ceiling, limits.ceiling))

  const tryAcquire: CapacityStore["tryAcquire"] = (input) =>
    Effect.sync((): TryAcquireResult => {
      const { limits, now } = input
      const model = modelFor(input.providerModel)
      prune(model, now)
      // When the request is refused, and whether a release may free it (see `TryAcquireResult`).
      const blocked =
        ((): { readonly until: number; readonly releaseMayFree: boolean; readonly paused?: true } | undefined => {
          if (model.pausedUntil > now) return { until: model.pausedUntil, releaseMayFree: false, paused: true }
          if (input.priority === "background") {
            model.marks.delete(input.workerId)
            if (model.marks.size > 0) return { until: now + capacityPollMs, releaseMayFree: false }
          }
          const limit = limitOf(model, limits)
          if (limit !== undefined && model.held.size >= Math.floor(limit)) {
            const soonestLapse = Math.min(...model.held.values())
            return { until: Math.min(soonestLapse, now + capacityPollMs), releaseMayFree: true }
          }
          if (limits.rpm !== undefined && model.log.length >= limits.rpm) {
            return {
              until: (model.log[model.log.length - limits.rpm]?.at ?? now) + capacityWindowMs,
              releaseMayFree: false
            }
          }
          if (limits.rpm !== undefined) {
            const pace = paceLimitOf(limits.rpm)
            const recent = model.log.filter((entry) => entry.at > now - capacityPaceMs)
            if (recent.length >= pace) {
              return { until: (recent[recent.length - pace]?.at ?? now) + capacityPaceMs, releaseMayFree: false }
            }
          }
          if (limits.tpm !== undefined && model.tokens > 0 && model.tokens + input.tokens > limits.tpm) {
            // The first moment enough of the window's tokens have expired.
            let remaining = model.tokens
            for (const entry of model.log) {
              remaining -= entry.tokens
              if (remaining === 0 || remaining + input.tokens <= limits.tpm) {
                return { until: entry.at + capacityWindowMs, releaseMayFree: true }
              }
            }
            return { until: now + capacityWindowMs, releaseMayFree: true }
          }
          return undefined
        })()
      const granted = blocked === undefined
      const interactiveLeft = input.interactiveWaiters - (granted && input.priority === "interactive" ? 1 : 0)
      if (interactiveLeft > 0) {
        model.marks.set(input.workerId, (blocked?.until ?? now) + interactiveMarkGraceMs)
      } else model.marks.delete(input.workerId)
      if (!granted) {
        return {
          granted: false,
          retryAt: blocked.until,
          releaseMayFree: blocked.releaseMayFree,
          ...(blocked.paused ? { paused: true } : {})
        }
      }
      model.log.push({ id: input.permitId, at: now, tokens: input.tokens })
      model.tokens += input.tokens
      model.held.set(input.permitId, now + Duration.toMillis(input.lease))
      return { granted: true }
    })

  const release: CapacityStore["release"] = (input) =>
    Effect.sync(() => {
      const { limits, now } = input
      const model = modelFor(input.providerModel)
      prune(model, now)
      model.held.delete(input.permitId)
      const index = model.log.findIndex((entry) => entry.id === input.permitId)
      const entry = model.log[index]
      if (entry !== undefined) {
        if (input.outcome === "unsent") {
          model.tokens -= entry.tokens
          model.log.splice(index, 1)
        } else if (input.totalTokens !== undefined) {
          model.tokens += input.totalTokens - entry.tokens
          entry.tokens = input.totalTokens
        }
      }
      const limit = limitOf(model, limits)
      if (limit === undefined || limits.ceiling === undefined) return
      if (input.outcome === "success") model.limit = Math.min(limits.ceiling, limit + aimdIncrease)
      if (input.outcome === "overload" && now - model.lastDecrease >= aimdDecreaseCooldownMs) {
        model.limit = Math.max(limits.floor, limit * aimdDecreaseFactor)
        model.lastDecrease = now
      }
    })

  return {
    tryAcquire,
    release,
    refresh: (providerModel, permitIds, leaseUntil) =>
      Effect.sync(() => {
        const model = modelFor(providerModel)
        for (const id of permitIds) if (model.held.has(id)) model.held.set(id, leaseUntil)
      }),
    pause: (providerModel, untilMs, now) =>
      Effect.sync(() => {
        const model = modelFor(providerModel)
        model.pausedUntil = Math.max(model.pausedUntil, Math.min(untilMs, now + maxPauseMs))
      }),
    withdraw: (providerModel, workerId) => Effect.sync(() => void modelFor(providerModel).marks.delete(workerId)),
    state: (providerModel, limits, now) =>
      Effect.sync((): StoreState => {
        const model = modelFor(providerModel)
        prune(model, now)
        return {
          inFlight: model.held.size,
          concurrencyLimit: limitOf(model, limits),
          requestsInWindow: model.log.length,
          tokensInWindow: model.tokens,
          pausedUntil: model.pausedUntil > now ? model.pausedUntil : 0
        }
      })
  }
}

/** The store several in-memory workers share (one per simulated Redis). */
export class MemoryCapacityStore
  extends Context.Tag("ai-job-engine/MemoryCapacityStore")<MemoryCapacityStore, CapacityStore>()
{
  static readonly layer = Layer.sync(MemoryCapacityStore, makeMemoryCapacityStore)
}

/** One worker's `ProviderCapacity` on the shared `MemoryCapacityStore`. */
export const MemoryProviderCapacity = (options: ProviderCapacityOptions = {}) =>
  Layer.scoped(
    ProviderCapacity,
    Effect.gen(function*() {
      const store = yield* MemoryCapacityStore
      const limits = yield* ProviderLimitsConfig
      return yield* makeProviderCapacity(store, limits, options)
    })
  )
