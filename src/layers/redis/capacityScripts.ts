import {
  aimdDecreaseCooldownMs,
  aimdDecreaseFactor,
  aimdIncrease,
  capacityPaceMs,
  capacityPollMs,
  capacityWindowMs,
  interactiveMarkGraceMs,
  maxPauseMs
} from "../../services/ProviderCapacityRoom.js"

/**
 * The Lua scripts of the Redis capacity store (`RedisProviderCapacity.ts` says what the keys
 * hold), one per operation so each is atomic. KEYS: log, tok, held, st, marks.
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
  -- Idle models vanish: everything expires a window after the last use or the pause's end, and
  -- nothing outlives a day.
  local paused = num(redis.call('HGET', K_ST, 'pausedUntil')) or 0
  local ttl = math.min(math.max(WINDOW * 2, paused - now + WINDOW), ${maxPauseMs})
  for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
`

// ARGV: now, permitId, tokens, priority, workerId, interactiveWaiters, rpm, tpm, ceiling, floor, leaseMs
export const tryAcquireScript = `${common}
local now = tonumber(ARGV[1])
local permit, tokens, priority, worker = ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local interactiveWaiters = tonumber(ARGV[6])
local rpm, tpm, ceiling, floor, lease = num(ARGV[7]), num(ARGV[8]), num(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
prune(now)
-- Until when the request is refused, 1 when a release may free it sooner (see TryAcquireResult),
-- and 1 when the refusal is a pause.
local function blockedUntil()
  local paused = num(redis.call('HGET', K_ST, 'pausedUntil')) or 0
  if paused > now then return paused, 0, 1 end
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
local blocked, releaseMayFree, pausedRefusal = blockedUntil()
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
return {0, tostring(blocked), releaseMayFree, pausedRefusal or 0}
`

// ARGV: now, permitId, outcome, totalTokens, ceiling, floor
export const releaseScript = `${common}
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
export const refreshScript = `${common}
for i = 2, #ARGV do redis.call('ZADD', K_HELD, 'XX', ARGV[1], ARGV[i]) end
-- A call longer than the idle expiry keeps its slot counted even when nothing else touches the model.
local ttl = redis.call('PTTL', K_HELD)
if ttl >= 0 and ttl < WINDOW * 2 then redis.call('PEXPIRE', K_HELD, WINDOW * 2) end
return 1
`

// ARGV: now, untilMs
export const pauseScript = `${common}
local now, untilMs = tonumber(ARGV[1]), math.min(tonumber(ARGV[2]), tonumber(ARGV[1]) + ${maxPauseMs})
local paused = num(redis.call('HGET', K_ST, 'pausedUntil')) or 0
if untilMs > paused then redis.call('HSET', K_ST, 'pausedUntil', untilMs) end
touch(now)
return 1
`

// ARGV: workerId
export const withdrawScript = `${common}
redis.call('ZREM', K_MARKS, ARGV[1])
return 1
`

// ARGV: now, ceiling, floor
export const stateScript = `${common}
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
