import { Duration, Effect, Layer } from "effect"
import { ProviderLimitsConfig } from "../../config/ProviderLimitsConfig.js"
import { ProviderCapacity } from "../../services/ProviderCapacity.js"
import {
  capacityPollMs,
  type CapacityStore,
  CapacityStoreError,
  makeProviderCapacity,
  type ProviderCapacityOptions,
  type StoreLimits
} from "../../services/ProviderCapacityRoom.js"
import {
  pauseScript,
  refreshScript,
  releaseScript,
  stateScript,
  tryAcquireScript,
  withdrawScript
} from "./capacityScripts.js"
import { luaScript } from "./luaScript.js"
import { RedisConnection } from "./RedisConnection.js"

/**
 * The capacity store in Redis, shared by every worker: one Lua script per operation, so each is
 * atomic. Per `provider/model`, under `{prefix}:capacity:{provider/model}:` (the braces keep a
 * model's keys in one cluster slot):
 * - `log`   sorted set, permit id -> grant time: the sliding window of `rpm` and `tpm`
 * - `tok`   hash, permit id -> tokens counted for it (the estimate, then the reported usage)
 * - `held`  sorted set, permit id -> lease end: the calls in flight (a crashed worker's lapse)
 * - `st`    hash: `tokens` (sum of `tok` in the window), `limit` (adaptive concurrency),
 *           `lastDecrease`, `pausedUntil` (never more than a day ahead)
 * - `marks` sorted set, worker id -> until: workers with interactive calls waiting
 *
 * Sliding window (a log of grants), not fixed windows: a fixed window lets a full minute's quota
 * through just before its boundary and another just after, twice the limit within 60 s, which
 * a provider counting continuously answers with 429s. The log holds at most `rpm` entries.
 * Times are the callers' Clocks (workers are NTP-synced; a skew of s moves a window edge by s),
 * which also lets the contract suite drive Redis with TestClock. Commands used are the ones the
 * engine's Redis ACL already grants for BullMQ's scripts.
 */

const numberOf = (value: number | string | undefined): number | undefined =>
  value === undefined || value === "" ? undefined : Number(value)

const capacityCommandTimeout = Duration.seconds(2)

const arg = (value: number | undefined) => value === undefined ? "" : String(value)

export const makeRedisCapacityStore = Effect.gen(function*() {
  const redis = yield* RedisConnection
  // Its own connection whose commands time out in ioredis after 2 s: an Effect timeout forked
  // two fibers per call, and every job makes several capacity calls.
  const commands = yield* redis.open("command", { commandTimeout: capacityCommandTimeout })

  const keysOf = (providerModel: string) => {
    const base = redis.key("capacity", `{${providerModel}}`)
    return [`${base}:log`, `${base}:tok`, `${base}:held`, `${base}:st`, `${base}:marks`]
  }

  const script = (operation: string, source: string) => {
    const run = luaScript(commands, source)
    return (providerModel: string, args: ReadonlyArray<string>) =>
      Effect.mapError(run(keysOf(providerModel), args), (cause) => new CapacityStoreError({ operation, cause }))
  }

  const runTryAcquire = script("tryAcquire", tryAcquireScript)
  const runRelease = script("release", releaseScript)
  const runRefresh = script("refresh", refreshScript)
  const runPause = script("pause", pauseScript)
  const runWithdraw = script("withdraw", withdrawScript)
  const runState = script("state", stateScript)

  const limitArgs = (limits: StoreLimits) => [arg(limits.ceiling), String(limits.floor)]

  return {
    tryAcquire: (input) =>
      Effect.map(
        runTryAcquire(input.providerModel, [
          String(input.now),
          input.permitId,
          String(input.tokens),
          input.priority,
          input.workerId,
          String(input.interactiveWaiters),
          arg(input.limits.rpm),
          arg(input.limits.tpm),
          ...limitArgs(input.limits),
          String(Duration.toMillis(input.lease))
        ]),
        ([granted, retryAt, releaseMayFree, paused]) =>
          granted === 1
            ? { granted: true } as const
            : {
              granted: false,
              retryAt: numberOf(retryAt) ?? input.now + capacityPollMs,
              releaseMayFree: releaseMayFree !== 0,
              ...(paused === 1 ? { paused: true } : {})
            } as const
      ),
    release: (input) =>
      Effect.asVoid(runRelease(input.providerModel, [
        String(input.now),
        input.permitId,
        input.outcome,
        arg(input.totalTokens),
        ...limitArgs(input.limits)
      ])),
    refresh: (providerModel, permitIds, leaseUntil) =>
      permitIds.length === 0
        ? Effect.void
        : Effect.asVoid(runRefresh(providerModel, [String(leaseUntil), ...permitIds])),
    pause: (providerModel, untilMs, now) =>
      Effect.asVoid(runPause(providerModel, [String(now), String(Math.ceil(untilMs))])),
    withdraw: (providerModel, workerId) => Effect.asVoid(runWithdraw(providerModel, [workerId])),
    state: (providerModel, limits, now) =>
      Effect.map(
        runState(providerModel, [String(now), ...limitArgs(limits)]),
        ([inFlight, limit, requests, tokens, paused]) => ({
          inFlight: numberOf(inFlight) ?? 0,
          concurrencyLimit: numberOf(limit),
          requestsInWindow: numberOf(requests) ?? 0,
          tokensInWindow: numberOf(tokens) ?? 0,
          pausedUntil: numberOf(paused) ?? 0
        })
      )
  } satisfies CapacityStore
})

/** This worker's `ProviderCapacity`, on the Redis every worker shares. */
export const RedisProviderCapacity = (options: ProviderCapacityOptions = {}) =>
  Layer.scoped(
    ProviderCapacity,
    Effect.gen(function*() {
      const store = yield* makeRedisCapacityStore
      const limits = yield* ProviderLimitsConfig
      return yield* makeProviderCapacity(store, limits, options)
    })
  )
