import { NodeContext } from "@effect/platform-node"
import { Duration, Effect, Fiber, Layer, Redacted, Schema } from "effect"
import { Redis } from "ioredis"
import mysql from "mysql2/promise"
import { runMigrations } from "../src/layers/mysql/migrate.js"
import { binaryStringsAsText } from "../src/layers/mysql/mysqlClient.js"
import { mysqlClientLayer } from "../src/layers/mysql/MysqlDatabase.js"

/** What one bench run owns: a migrated scratch database and a Redis key prefix. */
export interface BenchTarget {
  readonly databaseName: string
  readonly databaseUrl: string
  readonly redisUrl: string
  /** Every Redis key the run writes starts with `{redisPrefix}:`. */
  readonly redisPrefix: string
}

export const databaseUrlFor = (serverUrl: string, database: string) => {
  const url = new URL(serverUrl)
  url.pathname = `/${database}`
  return url.toString()
}

const suffix = () => `${process.pid}_${Math.floor(Math.random() * 1e9).toString(36)}`

/** A mysql2 promise pool (dates as UTC), closed with the scope. The bench's own, never the engine's. */
export const rawPool = (url: string, connectionLimit: number) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const parsed = new URL(url)
      return mysql.createPool({
        host: parsed.hostname,
        port: parsed.port === "" ? 3306 : Number(parsed.port),
        user: decodeURIComponent(parsed.username) || "root",
        password: parsed.password === "" ? undefined : decodeURIComponent(parsed.password),
        database: decodeURIComponent(parsed.pathname.slice(1)) || undefined,
        connectionLimit,
        timezone: "Z",
        dateStrings: false
      })
    }),
    (pool) => Effect.promise(() => pool.end()).pipe(Effect.timeoutOption("5 seconds"), Effect.ignore)
  )

/** Runs one statement on a pool (text protocol); a failure is a defect: the bench cannot go on without it. */
export const query = (pool: mysql.Pool, text: string, params: ReadonlyArray<string | number | Date | null> = []) =>
  Effect.promise(async (): Promise<unknown> => {
    const [rows] = await pool.query(text, [...params])
    // Identifier columns are VARBINARY: read them as text, as the engine's client does.
    binaryStringsAsText(rows)
    return rows
  })

/** Runs one SELECT and decodes its rows with `row`. */
export const queryAs = <A, I>(
  pool: mysql.Pool,
  row: Schema.Schema<A, I>,
  text: string,
  params: ReadonlyArray<string | number | Date | null> = []
) =>
  query(pool, text, params).pipe(
    Effect.flatMap(Schema.decodeUnknown(Schema.Array(row))),
    Effect.orDieWith((error) => new Error(`bench query did not decode (${text.slice(0, 60)}...): ${error.message}`))
  )

/**
 * Creates `bench_<pid>_<random>`, applies every migration with the engine's own Migrator, and
 * drops the database when the scope closes.
 */
export const scratchDatabase = (serverUrl: string) =>
  Effect.gen(function*() {
    const admin = yield* rawPool(serverUrl, 1)
    const databaseName = `bench_${suffix()}`
    yield* Effect.acquireRelease(
      query(admin, `CREATE DATABASE \`${databaseName}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`),
      () => query(admin, `DROP DATABASE IF EXISTS \`${databaseName}\``).pipe(Effect.ignore)
    )
    const databaseUrl = databaseUrlFor(serverUrl, databaseName)
    yield* runMigrations.pipe(
      Effect.provide(
        Layer.merge(mysqlClientLayer(Redacted.make(databaseUrl), { maxConnections: 1 }), NodeContext.layer)
      ),
      Effect.orDie
    )
    return { databaseName, databaseUrl }
  })

/** Deletes every key under `{prefix}:` (SCAN + UNLINK), returning how many went. */
export const deleteRedisKeys = (redisUrl: string, prefix: string) =>
  Effect.acquireUseRelease(
    Effect.sync(() => new Redis(redisUrl, { maxRetriesPerRequest: 2, connectionName: "bench-cleanup" })),
    (redis) =>
      Effect.promise(async () => {
        let cursor = "0"
        let deleted = 0
        do {
          const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000)
          cursor = next
          if (keys.length > 0) deleted += await redis.unlink(...keys)
        } while (cursor !== "0")
        return deleted
      }),
    (redis) => Effect.promise(() => redis.quit()).pipe(Effect.timeoutOption("2 seconds"), Effect.ignore)
  )

/** A fresh prefix whose keys are all deleted when the scope closes. */
export const redisNamespace = (redisUrl: string) =>
  Effect.acquireRelease(
    Effect.sync(() => `bench-${suffix()}`),
    (prefix) => deleteRedisKeys(redisUrl, prefix).pipe(Effect.ignore)
  )

/** Milliseconds on the wall clock (the same system clock MariaDB's UTC_TIMESTAMP(3) reads). */
export const wallMillis = Effect.sync(() => Date.now())

/** A monotonic high-resolution clock, for durations measured inside this process. */
export const monoMillis = Effect.sync(() => performance.now())

/**
 * Starts `start(i)` for each i below `count` on a fixed schedule, `ratePerSecond` from now, each in
 * a fiber of its own so a slow one never delays the next; waits until every one has ended.
 */
export const runPaced = <E, R>(
  count: number,
  ratePerSecond: number,
  start: (index: number) => Effect.Effect<unknown, E, R>
) =>
  Effect.gen(function*() {
    const paceStart = yield* monoMillis
    const fibers: Array<Fiber.RuntimeFiber<unknown, E>> = []
    for (let i = 0; i < count; i++) {
      const due = paceStart + (i * 1000) / ratePerSecond
      const now = yield* monoMillis
      if (due > now) yield* Effect.sleep(Duration.millis(due - now))
      fibers.push(yield* Effect.fork(start(i)))
    }
    yield* Fiber.joinAll(fibers)
  })
