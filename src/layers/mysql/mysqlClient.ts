import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient, Statement } from "@effect/sql"
import { MysqlClient } from "@effect/sql-mysql2"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer, Redacted, Scope, Stream } from "effect"
import * as Mysql from "mysql2"

/**
 * The engine's `MysqlClient`: `@effect/sql-mysql2`'s, with two differences: how rows are read,
 * and a pool of its own for transactions (see `MysqlTransactionConnections`).
 *
 * Identifier columns are VARBINARY (exact comparison, see migration 0011), which mysql2 hands
 * over as Buffers. The way mysql2 offers to read them as text, a `typeCast` function, makes its
 * row parser build a wrapper object with three closures for every column of every row (a status
 * read's largest cost after garbage collection); here the parser runs without one and the few
 * Buffer values of a row become UTF-8 text in place, before the names are transformed. Nothing
 * else differs: statements, prepared-statement caching, spans and the compiler are the library's.
 *
 * It mirrors `@effect/sql-mysql2` 0.53.0 (`MysqlClient.make` and its `ConnectionImpl`, whose
 * private `conn` field `MysqlUnitOfWork` also reads on the library's own connections);
 * test/integration/mysqlClientFork.mysql.test.ts fails when the installed version differs or moves that field.
 */
export const mirroredSqlMysql2Version = "0.53.0"

export interface EngineMysqlOptions {
  readonly host: string
  readonly port: number
  readonly database: string
  readonly username: string
  readonly password: Redacted.Redacted<string> | undefined
  readonly maxConnections: number
  readonly poolConfig: Omit<Mysql.PoolOptions, "typeCast">
  readonly transformResultNames: (name: string) => string
  readonly transformQueryNames: (name: string) => string
}

/** Rewrites a row's binary strings (the only Buffers a row holds: no column is a BLOB) as UTF-8 text, in place. */
const rowAsText = (row: object): void => {
  for (const key in row) {
    const value: unknown = Reflect.get(row, key)
    if (Buffer.isBuffer(value)) Reflect.set(row, key, value.toString("utf8"))
  }
}

/**
 * Rewrites the binary strings of a result in place: rows as objects, rows as arrays
 * (`rowsAsArray`), and the row sets of a multi-statement result; a result header has none.
 */
export const binaryStringsAsText = (results: unknown): void => {
  if (!Array.isArray(results)) return
  for (const row of results) {
    if (Array.isArray(row)) {
      for (let i = 0; i < row.length; i++) {
        const value: unknown = row[i]
        if (Buffer.isBuffer(value)) row[i] = value.toString("utf8")
        else if (typeof value === "object" && value !== null && !(value instanceof Date)) rowAsText(value)
      }
    } else if (typeof row === "object" && row !== null) {
      rowAsText(row)
    }
  }
}

type Rows = ReadonlyArray<Record<string, unknown>>
type TransformRows = (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined

/** One mysql2 pool or pooled connection as an `@effect/sql` connection (`conn` names the driver's, as the library's does). */
class EngineConnection implements Connection {
  constructor(readonly conn: Mysql.Pool | Mysql.PoolConnection) {}

  private runRaw(sql: string, values: ReadonlyArray<unknown>, rowsAsArray: boolean, method: "execute" | "query") {
    return Effect.async<unknown, SqlError>((resume) => {
      this.conn[method]({ sql, values: [...values], rowsAsArray }, (cause: unknown, results: unknown) => {
        if (cause) {
          resume(Effect.fail(new SqlError({ cause, message: "Failed to execute statement" })))
        } else {
          binaryStringsAsText(results)
          resume(Effect.succeed(results))
        }
      })
    })
  }

  private run(sql: string, values: ReadonlyArray<unknown>, rowsAsArray: boolean, method: "execute" | "query") {
    return Effect.map(
      this.runRaw(sql, values, rowsAsArray, method),
      (results): Rows => (Array.isArray(results) ? results : [])
    )
  }

  execute(sql: string, params: ReadonlyArray<unknown>, transformRows: TransformRows) {
    const rows = this.run(sql, params, false, "execute")
    return transformRows === undefined ? rows : Effect.map(rows, transformRows)
  }

  executeRaw(sql: string, params: ReadonlyArray<unknown>) {
    return this.runRaw(sql, params, false, "execute")
  }

  executeValues(sql: string, params: ReadonlyArray<unknown>) {
    return Effect.map(
      this.runRaw(sql, params, true, "execute"),
      (results): ReadonlyArray<ReadonlyArray<unknown>> => Array.isArray(results) ? results : []
    )
  }

  executeUnprepared(sql: string, params: ReadonlyArray<unknown>, transformRows: TransformRows) {
    const rows = this.run(sql, params, false, "query")
    return transformRows === undefined ? rows : Effect.map(rows, transformRows)
  }

  /** The engine reads no result as a stream: a streamed statement is read whole, then emitted. */
  executeStream(sql: string, params: ReadonlyArray<unknown>, transformRows: TransformRows) {
    return Stream.fromIterableEffect(this.executeUnprepared(sql, params, transformRows))
  }
}

/**
 * Connections for transactions only, from a pool of their own. The unit of work turns a new one's
 * autocommit off (with its session bounds), so every later transaction on it needs no BEGIN: its
 * first statement opens it and COMMIT or ROLLBACK ends it. A shared pool could not do this: it
 * would hand such a connection to a standalone statement, whose write would then never commit.
 */
export class MysqlTransactionConnections extends Context.Tag("ai-job-engine/MysqlTransactionConnections")<
  MysqlTransactionConnections,
  {
    /**
     * A connection with a scope of its own whose closing releases it, the shape
     * `SqlClient.makeWithTransaction` takes (cheaper than extending a new scope with a scoped
     * acquire). Only for an uninterruptible caller: nothing releases a connection taken by an
     * interrupted one.
     */
    readonly acquire: Effect.Effect<readonly [Scope.CloseableScope, Connection], SqlError>
  }
>() {}

const poolConnectionOf = (pool: Mysql.Pool) =>
  Effect.async<Mysql.PoolConnection, SqlError>((resume) => {
    pool.getConnection((cause, conn) =>
      resume(
        cause ? Effect.fail(new SqlError({ cause, message: "Failed to acquire connection" })) : Effect.succeed(conn)
      )
    )
  })

const connectionOf = (pool: Mysql.Pool) =>
  Effect.acquireRelease(poolConnectionOf(pool), (conn) => Effect.sync(() => conn.release())).pipe(
    Effect.map((conn) => new EngineConnection(conn))
  )

const releasableConnectionOf = (pool: Mysql.Pool) =>
  Effect.flatMap(poolConnectionOf(pool), (conn) =>
    Effect.flatMap(Scope.make(), (scope) =>
      Effect.as(
        Scope.addFinalizer(scope, Effect.sync(() => conn.release())),
        [scope, new EngineConnection(conn)] as const
      )))

const make = (options: EngineMysqlOptions) =>
  Effect.gen(function*() {
    const newPool = () =>
      Mysql.createPool({
        ...options.poolConfig,
        host: options.host,
        port: options.port,
        database: options.database,
        user: options.username,
        password: options.password === undefined ? undefined : Redacted.value(options.password),
        multipleStatements: true,
        supportBigNumbers: true,
        connectionLimit: options.maxConnections
      })
    const end = (pool: Mysql.Pool) => Effect.async<void>((resume) => void pool.end(() => resume(Effect.void)))
    // Standalone statements (autocommit), and transactions: each pool opens connections as they are needed.
    const pool = newPool()
    const transactionPool = yield* Effect.acquireRelease(Effect.sync(newPool), end)
    yield* Effect.acquireRelease(
      Effect.async<void, SqlError>((resume) => {
        pool.query("SELECT 1", (cause) =>
          resume(cause ? Effect.fail(new SqlError({ cause, message: "MysqlClient: Failed to connect" })) : Effect.void))
      }),
      () =>
        end(pool)
    ).pipe(
      Effect.timeoutFail({
        duration: "5 seconds",
        onTimeout: () =>
          new SqlError({ message: "MysqlClient: Connection timeout", cause: new Error("connection timeout") })
      })
    )
    const transactionConnection = connectionOf(transactionPool)
    const client = yield* SqlClient.make({
      acquirer: Effect.succeed(new EngineConnection(pool)),
      // The library's own `withTransaction` (it sends BEGIN) runs on the transaction pool too.
      transactionAcquirer: transactionConnection,
      compiler: MysqlClient.makeCompiler(options.transformQueryNames),
      spanAttributes: [
        ["db.system.name", "mysql"],
        ["server.address", options.host],
        ["server.port", options.port],
        ["db.namespace", options.database]
      ],
      transformRows: Statement.defaultTransforms(options.transformResultNames).array
    })
    const config: MysqlClient.MysqlClientConfig = {
      host: options.host,
      port: options.port,
      database: options.database,
      username: options.username,
      password: options.password,
      maxConnections: options.maxConnections,
      poolConfig: options.poolConfig,
      transformResultNames: options.transformResultNames,
      transformQueryNames: options.transformQueryNames
    }
    // `reserve` hands out an ordinary (autocommit) connection: one of the transaction pool's may have autocommit off.
    const mysqlClient: MysqlClient.MysqlClient = Object.assign(
      client,
      {
        [MysqlClient.TypeId]: MysqlClient.TypeId,
        config,
        reserve: connectionOf(pool)
      } as const
    )
    return {
      client: mysqlClient,
      transactions: MysqlTransactionConnections.of({
        acquire: releasableConnectionOf(transactionPool)
      })
    }
  })

/**
 * The client as both `MysqlClient` (the migrator's) and `SqlClient` (everyone else's), with the
 * transaction connections of the unit of work; both pools close with the layer. A process holds
 * up to `maxConnections` connections in each pool.
 */
export const engineMysqlLayer = (
  options: EngineMysqlOptions
): Layer.Layer<MysqlClient.MysqlClient | SqlClient.SqlClient | MysqlTransactionConnections, SqlError> =>
  Layer.scopedContext(
    Effect.map(make(options), ({ client, transactions }) =>
      Context.make(MysqlClient.MysqlClient, client).pipe(
        Context.add(SqlClient.SqlClient, client),
        Context.add(MysqlTransactionConnections, transactions)
      ))
  ).pipe(Layer.provide(Reactivity.layer))
