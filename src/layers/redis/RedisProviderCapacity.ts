import { createHash } from "node:crypto"
import { Effect, Layer, Schema } from "effect"
import { ProviderLimitsConfig } from "../../config/ProviderLimitsConfig.js"
import { ProviderCapacity } from "../../services/ProviderCapacity.js"
import {
  aimdDecreaseCooldownMs,
  aimdDecreaseFactor,
  aimdIncrease,
  capacityPaceMs,
  capacityPollMs,
  capacityWindowMs,
  type CapacityStore,
  CapacityStoreError,
  interactiveMarkGraceMs,
  makeProviderCapacity,
  type ProviderCapacityOptions,
  type StoreLimits
} from "../../services/ProviderCapacityRoom.js"
import { RedisConnection } from "./RedisConnection.js"

/**
 * The capacity store in Redis, shared by every worker: one Lua script per operation, so each is
 * atomic. Per `provider/model`, under `{prefix}:capacity:{provider/model}:` (the braces keep a
 * model's keys in one cluster slot):
 * - `log`   sorted set, permit id -> grant time: the sliding window of `rpm` and `tpm`
 * - `tok`   hash, permit id -> tokens counted for it (the estimate, then the reported usage)
 * - `held`  sorted set, permit id -> lease end: the calls in flight (a crashed worker's lapse)
 * - `st`    hash: `tokens` (sum of `tok` in the window), `limit` (adaptive concurrency),
 *           `lastDecrease`, `pausedUntil`
 * - `marks` sorted set, worker id -> until: workers with interactive calls waiting
 *
 * Sliding window (a log of grants), not fixed windows: a fixed window lets a full minute's quota
 * through just before its boundary and another just after, twice the limit within 60 s, which
 * a provider counting continuously answers with 429s. The log holds at most `rpm` entries.
 * Times are the callers' Clocks (workers are NTP-synced; a skew of s moves a window edge by s),
 * which also lets the contract suite drive Redis with TestClock. Commands used are the ones the
 * engine's Redis ACL already grants for BullMQ's scripts.
 */

const common = `
local K_LOG, K_TOK, K_HELD, K_ST, K_MARKS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local WINDOW = ${capacityWindowMs}
local PACE = ${capacityPaceMs}
local function num(v) if v == false or v == nil or v == '' then return nil end return tonumber(v) end
local function prune(now)
  local cutoff = now - WINDOW
  local expired = redis.call('ZRANGEBYSCORE', K_LOG, '-inf', cutoff)
  if #expired > 0 then
    local freed = 0
    for _, id in ipairs(expired) do
      freed = freed + (num(redis.call('HGET', K_TOK, id)) or 0)
      redis.call('HDEL', K_TOK, id)
    end
    redis.call('ZREMRANGEBYSCORE', K_LOG, '-inf', cutoff)
    redis.call('HINCRBY', K_ST, 'tokens', -freed)
  end
  redis.call('ZREMRANGEBYSCORE', K_HELD, '-inf', now)
  redis.call('ZREMRANGEBYSCORE', K_MARKS, '-inf', now)
end
local function limitOf(ceiling, floor)
  if ceiling == nil then return nil end
  local limit = num(redis.call('HGET', K_ST, 'limit')) or ceiling
  return math.max(floor, math.min(limit, ceiling))
end
local function touch(now)
  -- Idle models vanish: everything expires a window after the last use or the pause's end.
  local paused = num(redis.call('HGET', K_ST, 'pausedUntil')) or 0
  local ttl = math.max(WINDOW * 2, paused - now + WINDOW)
  for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
`

// ARGV: now, permitId, tokens, priority, workerId, interactiveWaiters, rpm, tpm, ceiling, floor, leaseMs
const tryAcquireScript = `${common}
local now = tonumber(ARGV[1])
local permit, tokens, priority, worker = ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local interactiveWaiters = tonumber(ARGV[6])
local rpm, tpm, ceiling, floor, lease = num(ARGV[7]), num(ARGV[8]), num(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
prune(now)
-- Until when the request is refused, and 1 when a release may free it sooner (see TryAcquireResult).
local function blockedUntil()
  local paused = num(redis.call('HGET', K_ST, 'pausedUntil')) or 0
  if paused > now then return paused, 0 end
  if priority == 'background' then
    redis.call('ZREM', K_MARKS, worker)
    if redis.call('ZCARD', K_MARKS) > 0 then return now + ${capacityPollMs}, 0 end
  end
  local limit = limitOf(ceiling, floor)
  if limit ~= nil and redis.call('ZCARD', K_HELD) >= math.floor(limit) then
    local soonest = redis.call('ZRANGE', K_HELD, 0, 0, 'WITHSCORES')
    return math.min(tonumber(soonest[2]), now + ${capacityPollMs}), 1
  end
  local count = redis.call('ZCARD', K_LOG)
  if rpm ~= nil and count >= rpm then
    local nth = redis.call('ZRANGE', K_LOG, count - rpm, count - rpm, 'WITHSCORES')
    return tonumber(nth[2]) + WINDOW, 0
  end
  if rpm ~= nil then
    local pace = math.max(1, math.ceil(rpm * PACE / WINDOW))
    local recent = redis.call('ZCOUNT', K_LOG, '(' .. (now - PACE), '+inf')
    if recent >= pace then
      local nth = redis.call('ZRANGEBYSCORE', K_LOG, '(' .. (now - PACE), '+inf', 'WITHSCORES', 'LIMIT', recent - pace, 1)
      return tonumber(nth[2]) + PACE, 0
    end
  end
  local sum = num(redis.call('HGET', K_ST, 'tokens')) or 0
  if tpm ~= nil and sum > 0 and sum + tokens > tpm then
    local entries = redis.call('ZRANGE', K_LOG, 0, -1, 'WITHSCORES')
    local remaining = sum
    for i = 1, #entries, 2 do
      remaining = remaining - (num(redis.call('HGET', K_TOK, entries[i])) or 0)
      if remaining == 0 or remaining + tokens <= tpm then return tonumber(entries[i + 1]) + WINDOW, 1 end
    end
    return now + WINDOW, 1
  end
  return nil, 0
end
local blocked, releaseMayFree = blockedUntil()
local granted = blocked == nil
local left = interactiveWaiters
if granted and priority == 'interactive' then left = left - 1 end
if left > 0 then redis.call('ZADD', K_MARKS, (blocked or now) + ${interactiveMarkGraceMs}, worker)
else redis.call('ZREM', K_MARKS, worker) end
if granted then
  redis.call('ZADD', K_LOG, now, permit)
  redis.call('HSET', K_TOK, permit, tokens)
  redis.call('HINCRBY', K_ST, 'tokens', tokens)
  redis.call('ZADD', K_HELD, now + lease, permit)
end
touch(now)
if granted then return {1, 0} end
return {0, tostring(blocked), releaseMayFree}
`

// ARGV: now, permitId, outcome, totalTokens, ceiling, floor
const releaseScript = `${common}
local now, permit, outcome, total = tonumber(ARGV[1]), ARGV[2], ARGV[3], num(ARGV[4])
local ceiling, floor = num(ARGV[5]), tonumber(ARGV[6])
prune(now)
redis.call('ZREM', K_HELD, permit)
local counted = num(redis.call('HGET', K_TOK, permit))
if counted ~= nil then
  if outcome == 'unsent' then
    redis.call('ZREM', K_LOG, permit)
    redis.call('HDEL', K_TOK, permit)
    redis.call('HINCRBY', K_ST, 'tokens', -counted)
  elseif total ~= nil then
    redis.call('HSET', K_TOK, permit, total)
    redis.call('HINCRBY', K_ST, 'tokens', total - counted)
  end
end
local limit = limitOf(ceiling, floor)
if limit ~= nil then
  if outcome == 'success' then
    redis.call('HSET', K_ST, 'limit', tostring(math.min(ceiling, limit + ${aimdIncrease})))
  elseif outcome == 'overload' then
    local last = num(redis.call('HGET', K_ST, 'lastDecrease'))
    if last == nil or now - last >= ${aimdDecreaseCooldownMs} then
      redis.call('HSET', K_ST, 'limit', tostring(math.max(floor, limit * ${aimdDecreaseFactor})), 'lastDecrease', now)
    end
  end
end
touch(now)
return 1
`

// ARGV: leaseUntil, permitIds...
const refreshScript = `${common}
for i = 2, #ARGV do redis.call('ZADD', K_HELD, 'XX', ARGV[1], ARGV[i]) end
-- A call longer than the idle expiry keeps its slot counted even when nothing else touches the model.
local ttl = redis.call('PTTL', K_HELD)
if ttl >= 0 and ttl < WINDOW * 2 then redis.call('PEXPIRE', K_HELD, WINDOW * 2) end
return 1
`

// ARGV: now, untilMs
const pauseScript = `${common}
local now, untilMs = tonumber(ARGV[1]), tonumber(ARGV[2])
local paused = num(redis.call('HGET', K_ST, 'pausedUntil')) or 0
if untilMs > paused then redis.call('HSET', K_ST, 'pausedUntil', untilMs) end
touch(now)
return 1
`

// ARGV: workerId
const withdrawScript = `${common}
redis.call('ZREM', K_MARKS, ARGV[1])
return 1
`

// ARGV: now, ceiling, floor
const stateScript = `${common}
local now, ceiling, floor = tonumber(ARGV[1]), num(ARGV[2]), tonumber(ARGV[3])
prune(now)
local limit = limitOf(ceiling, floor)
local paused = num(redis.call('HGET', K_ST, 'pausedUntil')) or 0
if paused <= now then paused = 0 end
return {
  redis.call('ZCARD', K_HELD),
  limit == nil and '' or tostring(limit),
  redis.call('ZCARD', K_LOG),
  tostring(num(redis.call('HGET', K_ST, 'tokens')) or 0),
  tostring(paused)
}
`

const Reply = Schema.Array(Schema.Union(Schema.Number, Schema.String))
const decodeReply = Schema.decodeUnknownEither(Reply)
const numberOf = (value: number | string | undefined): number | undefined =>
  value === undefined || value === "" ? undefined : Number(value)

const capacityCommandTimeoutMs = 2_000

const arg = (value: number | undefined) => value === undefined ? "" : String(value)

export const makeRedisCapacityStore = Effect.gen(function* () {
  const redis = yield* RedisConnection
  // Its own connection whose commands time out in ioredis after 2 s: an Effect timeout forked
  // two fibers per call, and every job makes several capacity calls.
  const commands = yield* redis.open("command", { commandTimeoutMs: capacityCommandTimeoutMs })

  const keysOf = (providerModel: string) => {
    const base = redis.key("capacity", `{${providerModel}}`)
    return [`${base}:log`, `${base}:tok`, `${base}:held`, `${base}:st`, `${base}:marks`]
  }

  /** EVALSHA, loading the script with EVAL when Redis does not know it yet. */
  const script = (operation: string, source: string) => {
    const sha = createHash("sha1").update(source).digest("hex")
    return (providerModel: string, args: ReadonlyArray<string>) =>
      Effect.tryPromise({
        try: async () => {
          const keys = keysOf(providerModel)
          try {
            return await commands.evalsha(sha, keys.length, ...keys, ...args)
          } catch (error) {
            if (error instanceof Error && error.message.startsWith("NOSCRIPT")) {
              return await commands.eval(source, keys.length, ...keys, ...args)
            }
            throw error
          }
        },
        catch: (cause) =>
          new CapacityStoreError({
            operation,
            cause: cause instanceof Error && cause.message === "Command timed out" ? "timeout" : cause
          })
      }).pipe(
        Effect.flatMap((reply) =>
          Effect.mapError(decodeReply(Array.isArray(reply) ? reply : [reply]), (cause) => new CapacityStoreError({ operation, cause })))
      )
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
          String(input.leaseMs)
        ]),
        ([granted, retryAt, releaseMayFree]) =>
          granted === 1
            ? { granted: true } as const
            : { granted: false, retryAt: numberOf(retryAt) ?? input.now + capacityPollMs, releaseMayFree: releaseMayFree !== 0 } as const
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
      permitIds.length === 0 ? Effect.void : Effect.asVoid(runRefresh(providerModel, [String(leaseUntil), ...permitIds])),
    pause: (providerModel, untilMs, now) => Effect.asVoid(runPause(providerModel, [String(now), String(Math.ceil(untilMs))])),
    withdraw: (providerModel, workerId) => Effect.asVoid(runWithdraw(providerModel, [workerId])),
    state: (providerModel, limits, now) =>
      Effect.map(runState(providerModel, [String(now), ...limitArgs(limits)]), ([inFlight, limit, requests, tokens, paused]) => ({
        inFlight: numberOf(inFlight) ?? 0,
        concurrencyLimit: numberOf(limit),
        requestsInWindow: numberOf(requests) ?? 0,
        tokensInWindow: numberOf(tokens) ?? 0,
        pausedUntil: numberOf(paused) ?? 0
      }))
  } satisfies CapacityStore
})

/** This worker's `ProviderCapacity`, on the Redis every worker shares. */
export const RedisProviderCapacity = (options: ProviderCapacityOptions = {}) =>
  Layer.scoped(
    ProviderCapacity,
    Effect.gen(function* () {
      const store = yield* makeRedisCapacityStore
      const limits = yield* ProviderLimitsConfig
      return yield* makeProviderCapacity(store, limits, options)
    })
  )
