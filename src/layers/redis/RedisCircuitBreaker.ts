import { Duration, Effect, Layer, PubSub, Runtime, Stream } from "effect"
import { CircuitBreakerSettings } from "../../config/CircuitBreakerSettings.js"
import {
  type BreakerRecord,
  type BreakerState,
  type BreakerStore,
  BreakerStoreError,
  type BreakerWrite,
  makeProviderCircuitBreaker,
  ProviderCircuitBreaker
} from "../../services/ProviderCircuitBreaker.js"
import { luaScript } from "./luaScript.js"
import { RedisConnection } from "./RedisConnection.js"

/**
 * The breaker store in Redis, shared by every process: one hash per `provider/model` at
 * `{prefix}:breaker:{provider/model}` (state, failures, lastFailureAt, openUntil, openMs,
 * probeUntil), changed only by these scripts, each atomic. A closed breaker with no failures has
 * no key; a key lives at most a day (two windows while it only counts failures). A change other
 * processes must see is published on `{prefix}:breaker:changed` with the model as the message.
 * The transitions are `ProviderCircuitBreaker.ts`' (`probeTransition`, `failureTransition`, ...).
 */

// KEYS: the hash. ARGV: channel, model, now, ...
const common = `
local K = KEYS[1]
local CHANNEL, NAME, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local DAY = 86400000
local function load()
  local v = redis.call('HMGET', K, 'state', 'failures', 'lastFailureAt', 'openUntil', 'openMs', 'probeUntil')
  return { state = v[1] or 'closed', failures = tonumber(v[2]) or 0, lastFailureAt = tonumber(v[3]) or 0,
    openUntil = tonumber(v[4]) or 0, openMs = tonumber(v[5]) or 0, probeUntil = tonumber(v[6]) or 0 }
end
local function save(before, r, countTtl)
  if r.state == 'closed' and r.failures == 0 then
    redis.call('DEL', K)
  else
    redis.call('HSET', K, 'state', r.state, 'failures', r.failures, 'lastFailureAt', r.lastFailureAt,
      'openUntil', r.openUntil, 'openMs', r.openMs, 'probeUntil', r.probeUntil)
    redis.call('PEXPIRE', K, r.state == 'closed' and math.min(countTtl or DAY, DAY) or DAY)
  end
  if before.state ~= r.state or ((before.failures > 0) ~= (r.failures > 0)) or r.probeUntil < before.probeUntil then
    redis.call('PUBLISH', CHANNEL, NAME)
  end
end
local function reply(before, r, probe)
  return { r.state, r.failures, r.openUntil, r.openMs, r.probeUntil, before.state, probe or 0 }
end
`

const readScript = `${common}
local r = load()
return reply(r, r)
`

// ARGV[4]: probe lease
const probeScript = `${common}
local before, r = load(), load()
local due = (r.state == 'open' and now >= r.openUntil) or (r.state == 'half_open' and now >= r.probeUntil)
if not due then return reply(before, r, 0) end
r.state = 'half_open'
r.probeUntil = now + tonumber(ARGV[4])
save(before, r)
return reply(before, r, 1)
`

// ARGV[4..7]: failures to open, window, openMs, maxOpenMs
const failureScript = `${common}
local threshold, window, baseOpen, maxOpen = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local before, r = load(), load()
if r.state == 'half_open' then
  local openMs = math.min(math.max(r.openMs * 2, baseOpen), maxOpen)
  r.state, r.openUntil, r.openMs, r.probeUntil, r.lastFailureAt = 'open', now + openMs, openMs, 0, now
elseif r.state == 'closed' then
  if now - r.lastFailureAt > window then r.failures = 1 else r.failures = r.failures + 1 end
  r.lastFailureAt = now
  if r.failures >= threshold then
    r.state, r.openUntil, r.openMs, r.probeUntil = 'open', now + baseOpen, baseOpen, 0
  end
end
save(before, r, window * 2)
return reply(before, r)
`

// ARGV[4]: when the answered call was sent
const successScript = `${common}
local before, r = load(), load()
if r.state == 'half_open' or (r.state == 'closed' and tonumber(ARGV[4]) >= r.lastFailureAt) then
  r = { state = 'closed', failures = 0, lastFailureAt = 0, openUntil = 0, openMs = 0, probeUntil = 0 }
end
save(before, r)
return reply(before, r)
`

const abandonScript = `${common}
local before, r = load(), load()
if r.state == 'half_open' then r.probeUntil = 0 end
save(before, r)
return reply(before, r)
`

const states: ReadonlySet<string> = new Set<BreakerState>(["closed", "open", "half_open"])
const isState = (value: unknown): value is BreakerState => typeof value === "string" && states.has(value)

/** `[state, failures, openUntil, openMs, probeUntil, stateBefore, probe]` as the scripts answer. */
const writeOf = (reply: ReadonlyArray<number | string>): (BreakerWrite & { readonly probe: boolean }) | undefined => {
  const [state, failures, openUntil, openMs, probeUntil, from, probe] = reply
  if (!isState(state) || !isState(from)) return undefined
  const record: BreakerRecord = {
    state,
    failures: Number(failures ?? 0),
    openUntil: Number(openUntil ?? 0),
    openMs: Number(openMs ?? 0),
    probeUntil: Number(probeUntil ?? 0)
  }
  return { record, from, probe: Number(probe ?? 0) === 1 }
}

const breakerCommandTimeout = Duration.seconds(2)

export const makeRedisBreakerStore = Effect.gen(function*() {
  const redis = yield* RedisConnection
  const commands = yield* redis.open("command", { commandTimeout: breakerCommandTimeout })
  const channel = redis.key("breaker", "changed")
  const keyOf = (providerModel: string) => redis.key("breaker", `{${providerModel}}`)

  const run = (operation: string, source: string) => {
    const script = luaScript(commands, source)
    return (providerModel: string, now: number, extra: ReadonlyArray<number> = []) =>
      script([keyOf(providerModel)], [channel, providerModel, String(now), ...extra.map(String)]).pipe(
        Effect.mapError((cause) => new BreakerStoreError({ operation, cause })),
        Effect.flatMap((reply) => {
          const write = writeOf(reply)
          return write === undefined
            ? Effect.fail(new BreakerStoreError({ operation, cause: "unexpected reply" }))
            : Effect.succeed(write)
        })
      )
  }
  const read = run("read", readScript)
  const probe = run("tryProbe", probeScript)
  const failure = run("recordFailure", failureScript)
  const success = run("recordSuccess", successScript)
  const abandon = run("abandonProbe", abandonScript)

  // Change messages from every process, this one's included; ioredis re-subscribes after a reconnect.
  const changed = yield* PubSub.unbounded<string>()
  const runtime = yield* Effect.runtime<never>()
  const subscriber = yield* redis.open("subscriber")
  subscriber.on("message", (from: string, providerModel: string) => {
    if (from === channel) Runtime.runFork(runtime)(PubSub.publish(changed, providerModel))
  })
  yield* Effect.tryPromise(() => subscriber.subscribe(channel)).pipe(
    Effect.catchAll((error) =>
      Effect.logWarning("Subscribing to circuit breaker changes failed; breakers are re-read every few seconds").pipe(
        Effect.annotateLogs({ error: error.message })
      )
    ),
    Effect.forkScoped
  )

  return {
    read: (providerModel, now) => Effect.map(read(providerModel, now), (write) => write.record),
    tryProbe: (providerModel, now, probeLease) => probe(providerModel, now, [Duration.toMillis(probeLease)]),
    recordFailure: (providerModel, now, settings) =>
      failure(providerModel, now, [
        settings.failures,
        Duration.toMillis(settings.window),
        Duration.toMillis(settings.openDuration),
        Duration.toMillis(settings.maxOpenDuration)
      ]),
    recordSuccess: (providerModel, now, sentAt) => success(providerModel, now, [sentAt]),
    abandonProbe: (providerModel, now) => abandon(providerModel, now),
    changes: Stream.fromPubSub(changed)
  } satisfies BreakerStore
})

/** This process's breaker, on the Redis every process shares (needs `RedisConnection`, `CircuitBreakerSettings`). */
export const RedisCircuitBreaker = Layer.scoped(
  ProviderCircuitBreaker,
  Effect.gen(function*() {
    const store = yield* makeRedisBreakerStore
    const settings = yield* CircuitBreakerSettings
    return yield* makeProviderCircuitBreaker(store, settings)
  })
)
