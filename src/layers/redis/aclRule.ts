/**
 * The Redis ACL an engine process needs (docs/architecture.md §14.2), for a deployment that gives the engine its
 * own Redis user instead of `default`. Every process type (API, dispatcher, worker, all-in-one)
 * uses the same rule. `REDIS_URL=redis://{user}:{password}@host:port` selects the user.
 *
 * Keys: everything the engine touches lives under `REDIS_KEY_PREFIX` (default `aije`):
 * BullMQ's keys under `{prefix}:bull:*`, the worker heartbeats `{prefix}:worker:heartbeat:*`,
 * the cancel markers `{prefix}:job:cancel:*`. Redis checks keys that BullMQ's Lua scripts build
 * at run time too; they all stay under the prefix.
 *
 * Channels: `{prefix}:outbox:wake` (PUBLISH / SUBSCRIBE), `{prefix}:job:cancel:{jobId}`
 * (PUBLISH, and PSUBSCRIBE to `{prefix}:job:cancel:*`) and `{prefix}:job:events:{jobId}`
 * (PUBLISH, and PSUBSCRIBE to `{prefix}:job:events:*` in a process that serves live status).
 * Redis compares a PSUBSCRIBE pattern with the allowed channel patterns literally, so each
 * pattern the engine subscribes to is granted by name (`patternSubscriptions`).
 *
 * Commands, by who issues them:
 * - ioredis on connect: INFO (its ready check), CLIENT SETNAME (`connectionName`); AUTH / HELLO
 *   need no grant. PING (readiness probe), QUIT (shutdown).
 * - BullMQ from the client: EVALSHA (its Lua scripts; EVAL when a script is not cached yet),
 *   BZPOPMIN (a worker waiting on the queue's marker), INFO (the version and maxmemory-policy
 *   check of every connection, `RedisConnection.getRedisVersionAndType`), CLIENT SETNAME,
 *   MULTI / EXEC, EXISTS.
 * - BullMQ's Lua scripts (Redis checks the user's ACL on every `redis.call`): the hash, list,
 *   set, sorted-set, stream and string commands listed in `bullMqScriptCommands`, taken from
 *   every script BullMQ 6.7 ships (not only the ones a run happens to hit).
 * - The engine's own code: SET (with EX), GET, DEL, MGET, EXISTS, ZADD / ZRANGEBYSCORE / ZREM /
 *   ZREMRANGEBYSCORE / PEXPIRE (the worker index), PUBLISH, SUBSCRIBE, PSUBSCRIBE (+ UNSUBSCRIBE /
 *   PUNSUBSCRIBE on close), MULTI / EXEC; EVALSHA / EVAL (the capacity and breaker scripts, which
 *   publish breaker changes on `{prefix}:breaker:changed`).
 *
 * Left out on purpose: SCAN and KEYS (they list every key name on the server, whatever the
 * user's key patterns; nothing the engine runs needs them: BullMQ only scans in
 * `removeOrphanedJobs`, which the engine never calls), and SELECT (ioredis sends it only when
 * the URL names a database other than 0: the engine user works in database 0). Nothing else
 * either: no FLUSH*, CONFIG, DEBUG, SHUTDOWN, SCRIPT, FUNCTION, ACL, MONITOR or CLIENT KILL /
 * LIST, and no key or channel outside the prefix. INFO stays, for ioredis and BullMQ; it shows
 * server-wide statistics (no key names or values).
 */

/** Every command BullMQ 6.7's Lua scripts call (`rcall(...)` across `dist/esm/scripts`). */
export const bullMqScriptCommands = [
  "del",
  "exists",
  "get",
  "hdel",
  "hexists",
  "hget",
  "hgetall",
  "hincrby",
  "hlen",
  "hmget",
  "hmset",
  "hscan",
  "hset",
  "incr",
  "incrby",
  "lindex",
  "llen",
  "lpop",
  "lpos",
  "lpush",
  "lrange",
  "lrem",
  "lset",
  "ltrim",
  "persist",
  "pexpire",
  "pexpireat",
  "pttl",
  "rename",
  "rpop",
  "rpoplpush",
  "rpush",
  "sadd",
  "scard",
  "set",
  "sismember",
  "smembers",
  "srem",
  "sscan",
  "time",
  "type",
  "unlink",
  "xadd",
  "xdel",
  "xlen",
  "xrange",
  "xread",
  "xtrim",
  "zadd",
  "zcard",
  "zcount",
  "zlexcount",
  "zpopmin",
  "zrange",
  "zrangebylex",
  "zrangebyscore",
  "zrem",
  "zremrangebyrank",
  "zremrangebyscore",
  "zrevrange",
  "zrevrangebyscore",
  "zscore"
] as const

/** Commands issued from the client side: ioredis, BullMQ's client code and the engine's own. */
export const clientCommands = [
  "ping",
  "quit",
  "info",
  "client|setname",
  "client|getname",
  "evalsha",
  "eval",
  "bzpopmin",
  "multi",
  "exec",
  "discard",
  "set",
  "get",
  "del",
  "mget",
  "exists",
  "zadd",
  "zrangebyscore",
  "zrem",
  "zremrangebyscore",
  "pexpire",
  "publish",
  "subscribe",
  "psubscribe",
  "unsubscribe",
  "punsubscribe"
] as const

/** The channel patterns the engine PSUBSCRIBEs to, under the prefix: cancels and job events. */
export const patternSubscriptions = (
  prefix: string
): ReadonlyArray<string> => [`${prefix}:job:cancel:*`, `${prefix}:job:events:*`]

/**
 * The ACL rule of an engine user under `prefix`, as the words that follow `ACL SETUSER {name}`
 * (without the `on` and `>{password}` that enable the user and set its password).
 */
export const engineAclRule = (prefix: string): string => {
  const commands = Array.from(new Set<string>([...clientCommands, ...bullMqScriptCommands]))
  return [
    "resetkeys",
    "resetchannels",
    `~${prefix}:*`,
    `&${prefix}:*`,
    ...patternSubscriptions(prefix).map((pattern) => `&${pattern}`),
    "-@all",
    ...commands.map((command) => `+${command}`)
  ].join(" ")
}
