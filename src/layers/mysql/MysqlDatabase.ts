import { Effect, Layer, Option, Redacted, String as Str } from "effect"
import { StorageConfig } from "../../config/EngineConfig.js"
import { engineMysqlLayer } from "./mysqlClient.js"

/** The parts of a `mysql://user:password@host:port/database` URL the pool needs. */
export const parseDatabaseUrl = (url: Redacted.Redacted<string>) => {
  const parsed = new URL(Redacted.value(url))
  return {
    host: parsed.hostname,
    port: parsed.port === "" ? 3306 : Number(parsed.port),
    username: decodeURIComponent(parsed.username) || "root",
    password: parsed.password === "" ? undefined : Redacted.make(decodeURIComponent(parsed.password)),
    database: decodeURIComponent(parsed.pathname.slice(1))
  }
}

/**
 * Prepared statements each connection keeps (least recently used closed first). mysql2's default,
 * 16,000, preallocates 0.5 MB of cache per connection and keeps every distinct statement text, and
 * a batch write with one placeholder group per row is a new text for every batch size.
 */
const preparedStatementsPerConnection = 256

/** A name transform remembered per name: every row of every query renames the same few columns. */
const memoized = (transform: (name: string) => string) => {
  const names = new Map<string, string>()
  return (name: string) => {
    const known = names.get(name)
    if (known !== undefined) return known
    const renamed = transform(name)
    names.set(name, renamed)
    return renamed
  }
}
const snakeToCamel = memoized(Str.snakeToCamel)
const camelToSnake = memoized(Str.camelToSnake)

/**
 * A MySQL pool for `url`. Rows come back camelCased; dates are read and written as UTC, and
 * every SQL time comparison uses the server's `UTC_TIMESTAMP(3)`, so no worker clock and no
 * session time zone can skew a lease.
 */
export const mysqlClientLayer = (
  url: Redacted.Redacted<string>,
  options: { readonly maxConnections?: number } = {}
) => {
  const parts = parseDatabaseUrl(url)
  const maxConnections = options.maxConnections ?? 10
  return engineMysqlLayer({
    host: parts.host,
    port: parts.port,
    username: parts.username,
    password: parts.password,
    database: parts.database,
    maxConnections,
    // Released connections stay open (until the server's wait_timeout): a pool that closes
    // every released connection reconnects on each burst, which then queues behind handshakes.
    poolConfig: {
      timezone: "Z",
      dateStrings: false,
      decimalNumbers: true,
      maxIdle: maxConnections,
      maxPreparedStatements: preparedStatementsPerConnection
    },
    transformResultNames: snakeToCamel,
    transformQueryNames: camelToSnake
  })
}

/** The pool for `DATABASE_URL`; fails at start if it is unset. */
export const MysqlFromConfig = Layer.unwrapEffect(
  Effect.gen(function*() {
    const storage = yield* StorageConfig
    return Option.match(storage.databaseUrl, {
      onNone: () => Layer.die(new Error("DATABASE_URL is not set: the MySQL layers need it")),
      onSome: (url) => mysqlClientLayer(url, { maxConnections: storage.databasePoolSize })
    })
  })
)
