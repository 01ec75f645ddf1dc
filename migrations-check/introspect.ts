import { SqlClient, SqlSchema } from "@effect/sql"
import { Array as Arr, Effect, Option, Schema } from "effect"
import { migrationsTable } from "../migrations/index.js"
import { IntrospectionFailed } from "./errors.js"
import { jsonValidatedColumn, normalizeColumnDefault, normalizeColumnType } from "./normalizeType.js"

/** A column as the database has it, its type normalized (see normalizeType.ts). */
export interface IntrospectedColumn {
  readonly name: string
  readonly type: string
  /** The type exactly as information_schema reported it, for the diff. */
  readonly reportedType: string
  readonly nullable: boolean
  /** The default, normalized (lower case, no quotes); undefined when the column has none. */
  readonly defaultValue?: string | undefined
}

export interface IntrospectedIndex {
  readonly name: string
  readonly columns: ReadonlyArray<string>
  readonly unique: boolean
  readonly primary: boolean
}

export interface IntrospectedTable {
  readonly name: string
  readonly columns: ReadonlyArray<IntrospectedColumn>
  readonly indexes: ReadonlyArray<IntrospectedIndex>
}

export interface IntrospectedSchema {
  readonly database: string
  readonly serverVersion: string
  readonly tables: ReadonlyArray<IntrospectedTable>
}

// information_schema rows, decoded at the boundary. Columns are aliased to lower case in SQL so
// the shape does not depend on the server's casing, and queries run without the client's name
// transforms so it does not depend on how the pool was configured either.

const ConnectionRow = Schema.Struct({
  database_name: Schema.NullOr(Schema.String),
  server_version: Schema.String
})

const TableRow = Schema.Struct({ table_name: Schema.String })

const ColumnRow = Schema.Struct({
  table_name: Schema.String,
  column_name: Schema.String,
  column_type: Schema.String,
  is_nullable: Schema.Literal("YES", "NO"),
  column_default: Schema.NullOr(Schema.String)
})

/** Numbers may arrive as strings depending on the driver's big-number settings. */
const Count = Schema.Union(Schema.Number, Schema.NumberFromString)

const IndexColumnRow = Schema.Struct({
  table_name: Schema.String,
  index_name: Schema.String,
  non_unique: Count,
  seq_in_index: Count,
  // MySQL 8 functional index parts have no column.
  column_name: Schema.NullOr(Schema.String)
})

const CheckRow = Schema.Struct({ table_name: Schema.String, check_clause: Schema.String })

const failWith = (step: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(effect, (cause) => new IntrospectionFailed({ step, cause }))

/**
 * Reads the tables, columns and indexes of the connection's current database from
 * information_schema. The Migrator's own bookkeeping table is left out: it is not part of the
 * contract.
 */
export const introspectCurrentDatabase: Effect.Effect<IntrospectedSchema, IntrospectionFailed, SqlClient.SqlClient> =
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()

    const connection = yield* SqlSchema.single({
      Request: Schema.Void,
      Result: ConnectionRow,
      execute: () => sql`SELECT DATABASE() AS database_name, VERSION() AS server_version`
    })(undefined).pipe(failWith("current database"))
    const database = connection.database_name
    if (database === null) {
      return yield* new IntrospectionFailed({
        step: "current database",
        cause: new Error("the connection has no database selected; put one in the URL's path")
      })
    }

    const tableRows = yield* SqlSchema.findAll({
      Request: Schema.String,
      Result: TableRow,
      execute: (schema) =>
        sql`SELECT TABLE_NAME AS table_name FROM information_schema.TABLES
            WHERE TABLE_SCHEMA = ${schema} AND TABLE_TYPE = 'BASE TABLE'
            ORDER BY TABLE_NAME`
    })(database).pipe(failWith("TABLES"))

    const columnRows = yield* SqlSchema.findAll({
      Request: Schema.String,
      Result: ColumnRow,
      execute: (schema) =>
        sql`SELECT TABLE_NAME AS table_name, COLUMN_NAME AS column_name,
                   COLUMN_TYPE AS column_type, IS_NULLABLE AS is_nullable, COLUMN_DEFAULT AS column_default
            FROM information_schema.COLUMNS
            WHERE TABLE_SCHEMA = ${schema}
            ORDER BY TABLE_NAME, ORDINAL_POSITION`
    })(database).pipe(failWith("COLUMNS"))

    const indexRows = yield* SqlSchema.findAll({
      Request: Schema.String,
      Result: IndexColumnRow,
      execute: (schema) =>
        sql`SELECT TABLE_NAME AS table_name, INDEX_NAME AS index_name, NON_UNIQUE AS non_unique,
                   SEQ_IN_INDEX AS seq_in_index, COLUMN_NAME AS column_name
            FROM information_schema.STATISTICS
            WHERE TABLE_SCHEMA = ${schema}
            ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX`
    })(database).pipe(failWith("STATISTICS"))

    // Only MariaDB needs the checks (to recognise JSON columns), and only MariaDB's
    // CHECK_CONSTRAINTS has TABLE_NAME: MySQL 8 reports JSON columns as `json` directly.
    const checkRows = connection.server_version.toLowerCase().includes("mariadb")
      ? yield* SqlSchema.findAll({
        Request: Schema.String,
        Result: CheckRow,
        execute: (schema) =>
          sql`SELECT TABLE_NAME AS table_name, CHECK_CLAUSE AS check_clause
              FROM information_schema.CHECK_CONSTRAINTS
              WHERE CONSTRAINT_SCHEMA = ${schema}`
      })(database).pipe(failWith("CHECK_CONSTRAINTS"))
      : []

    const jsonColumns = new Set(
      Arr.filterMap(
        checkRows,
        (row) =>
          Option.map(
            Option.fromNullable(jsonValidatedColumn(row.check_clause)),
            (column) => `${row.table_name}.${column}`
          )
      )
    )

    const columnsByTable = Arr.groupBy(columnRows, (row) => row.table_name)
    const indexRowsByTable = Arr.groupBy(indexRows, (row) => row.table_name)

    const tables = tableRows
      .filter((row) => row.table_name !== migrationsTable)
      .map((row): IntrospectedTable => ({
        name: row.table_name,
        columns: (columnsByTable[row.table_name] ?? []).map((column) => ({
          name: column.column_name,
          type: normalizeColumnType(column.column_type, jsonColumns.has(`${row.table_name}.${column.column_name}`)),
          reportedType: column.column_type,
          nullable: column.is_nullable === "YES",
          defaultValue: normalizeColumnDefault(column.column_default)
        })),
        indexes: indexesOf(indexRowsByTable[row.table_name] ?? [])
      }))

    return { database, serverVersion: connection.server_version, tables }
  }).pipe(Effect.withSpan("migrationsCheck.introspect"))

/** Folds STATISTICS rows (one per indexed column, ordered by index then position) into indexes. */
const indexesOf = (rows: ReadonlyArray<typeof IndexColumnRow.Type>): ReadonlyArray<IntrospectedIndex> =>
  Object.values(Arr.groupBy(rows, (row) => row.index_name)).map((parts) => {
    const first = Arr.headNonEmpty(parts)
    return {
      name: first.index_name,
      columns: parts.map((part) => part.column_name ?? "(expression)"),
      unique: first.non_unique === 0,
      primary: first.index_name === "PRIMARY"
    }
  })
