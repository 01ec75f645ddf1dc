import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { PersistenceError } from "../../domain/PersistenceError.js"
import { type ProjectionRow, ProjectionStore, type ProjectionValue } from "../../services/ProjectionStore.js"
import { sqlClock } from "./sqlClock.js"
import { isDuplicateKey, persistence } from "./sqlErrors.js"
import { paddedForIn } from "./statementShapes.js"

/** Table and column names come from projector code, never from a request; still, check them. */
const identifierPattern = /^[a-z][a-z0-9_]{0,63}$/

const checkIdentifiers = (operation: string, names: ReadonlyArray<string>) => {
  const bad = names.find((name) => !identifierPattern.test(name))
  return bad === undefined
    ? Effect.void
    : Effect.fail(new PersistenceError({ operation, message: `not a plain SQL identifier: ${bad}` }))
}

const parseJsonColumns = (row: Readonly<Record<string, unknown>>, jsonColumns: ReadonlyArray<string>) => {
  const parsed: Record<string, unknown> = { ...row }
  for (const column of jsonColumns) {
    const value = parsed[column]
    // MariaDB stores JSON as LONGTEXT and hands it back as text; MySQL 8 parses it.
    if (typeof value === "string") parsed[column] = JSON.parse(value)
  }
  return parsed
}

export const MysqlProjectionStore = Layer.effect(
  ProjectionStore,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { now } = sqlClock(sql)

    const insert: ProjectionStore["Type"]["insert"] = (table, rows, options) =>
      Effect.gen(function*() {
        if (rows.length === 0) return { inserted: 0, duplicates: 0 }
        const columns = Object.keys(rows[0]!)
        yield* checkIdentifiers(`${table}.insert`, [table, ...columns])
        const jsonColumns = options.jsonColumns ?? []
        const toParameter = (column: string, value: ProjectionValue | undefined) => {
          if (value === undefined || value === null) return null
          if (jsonColumns.includes(column) || Array.isArray(value)) return JSON.stringify(value)
          return value
        }
        // `created_at` is the database clock's UTC time, like every other time the engine writes
        // (the column default follows the session time zone, so it is only a fallback).
        const stamped = !columns.includes("created_at")
        const columnList = sql.literal(
          [...columns, ...(stamped ? ["created_at"] : [])].map((column) => `\`${column}\``).join(", ")
        )
        const valuesOf = (row: ProjectionRow) =>
          sql.csv([...columns.map((column) => sql`${toParameter(column, row[column])}`), ...(stamped ? [now] : [])])
        const insertRows = (batch: ReadonlyArray<ProjectionRow>) =>
          sql`INSERT INTO ${sql.literal(`\`${table}\``)} (${columnList}) VALUES ${
            sql.csv(batch.map((row) => sql`(${valuesOf(row)})`))
          }`.raw
        // A duplicate key refuses the statement without aborting the transaction: the rows a
        // unique key already holds are skipped and the rest inserted. Any other data error fails
        // loudly (no IGNORE, which would also turn a missing value into a zero or empty one).
        const insertMissing = Effect.gen(function*() {
          const existing = yield* sql<{ readonly id: string }>`
            SELECT id FROM ${sql.literal(`\`${table}\``)} WHERE id IN ${sql.in(paddedForIn(rows.map((row) => row.id)))}`
          const taken = new Set(existing.map((row) => row.id))
          const missing = rows.filter((row) => !taken.has(row.id))
          if (missing.length > 0) yield* insertRows(missing)
          return missing.length
        })
        const inserted = yield* insertRows(rows).pipe(
          Effect.as(rows.length),
          Effect.catchIf(isDuplicateKey, () => insertMissing),
          persistence(`${table}.insert`)
        )
        return { inserted, duplicates: rows.length - inserted }
      })

    const findByJob: ProjectionStore["Type"]["findByJob"] = (table, jobId, options) =>
      checkIdentifiers(`${table}.findByJob`, [table, options.orderBy]).pipe(
        Effect.zipRight(
          sql`SELECT * FROM ${sql.literal(`\`${table}\``)} WHERE job_id = ${jobId} ORDER BY ${
            sql.literal(`\`${options.orderBy}\``)
          }`
            .withoutTransform.pipe(persistence(`${table}.findByJob`))
        ),
        Effect.flatMap((rows) =>
          Effect.try({
            try: () => rows.map((row) => parseJsonColumns(row, options.jsonColumns ?? [])),
            catch: (cause) =>
              new PersistenceError({
                operation: `${table}.findByJob`,
                message: `a JSON column does not parse: ${String(cause)}`
              })
          })
        )
      )

    return ProjectionStore.of({ insert, findByJob })
  })
)

export type { ProjectionRow }
