import type { SqlClient, Statement } from "@effect/sql"
import { Effect } from "effect"
/**
 * The values of an `IN (…)` list padded to the next power of two by repeating the last one. A
 * statement then takes one of a few shapes instead of one per list length: mysql2 prepares each
 * shape once per connection, and MySQL caps prepared statements across all clients
 * (`max_prepared_stmt_count`). A repeated value changes no `IN` result and no affected-row count.
 */
export const paddedForIn = <A>(values: ReadonlyArray<A>): ReadonlyArray<A> => {
  const last = values[values.length - 1]
  if (last === undefined) return values
  let size = 1
  while (size < values.length) size *= 2
  return size === values.length ? values : [...values, ...Array.from({ length: size - values.length }, () => last)]
}

/**
 * `items` in chunks whose sizes are distinct powers of two, largest first (100 = 64 + 32 + 4): a
 * multi-row statement then takes one of a few shapes (7 up to 127 rows) whatever the count, so
 * it can be prepared once per connection like every other statement (see `paddedForIn`).
 */
export const powerOfTwoChunks = <A>(items: ReadonlyArray<A>): ReadonlyArray<ReadonlyArray<A>> => {
  const chunks: Array<ReadonlyArray<A>> = []
  let start = 0
  while (start < items.length) {
    let size = 1
    while (size * 2 <= items.length - start) size *= 2
    chunks.push(items.slice(start, start + size))
    start += size
  }
  return chunks
}

/**
 * Many rows in few `INSERT`s (a batch create writes each table so), one per `powerOfTwoChunks`
 * chunk: the columns of the first row (every row was encoded by one Schema, so all share its
 * keys), then `stamped` columns whose value is an SQL expression, the same for every row (the
 * database clock). `sql.insert` binds values only, so it cannot carry the expressions.
 *
 * The statement's text and values are put together here rather than from one fragment per value:
 * the client's compiler renders the table, the columns, a placeholder and each stamped expression
 * once, so the text is the one those fragments compile to, at a fraction of the cost (a batch of
 * 100 jobs binds a few thousand values).
 */
export const insertRows = (
  sql: SqlClient.SqlClient,
  table: string,
  rows: ReadonlyArray<Readonly<Record<string, unknown>>>,
  stamped: ReadonlyArray<readonly [column: string, value: Statement.Fragment]> = []
) =>
  Effect.suspend(() => {
    const columns = Object.keys(rows[0] ?? {})
    const names = sql.csv([...columns, ...stamped.map(([column]) => column)].map((column) => sql`${sql(column)}`))
    const [head] = sql`INSERT INTO ${sql(table)} (${names}) VALUES `.compile()
    const [placeholder] = sql`${null}`.compile()
    const expressions = stamped.map(([, value]) => sql`${value}`.compile())
    const tupleText = `(${[...columns.map(() => placeholder), ...expressions.map(([text]) => text)].join(", ")})`
    const expressionValues = expressions.flatMap(([, values]) => values)
    return Effect.forEach(
      powerOfTwoChunks(rows),
      (chunk) => {
        const values: Array<unknown> = []
        for (const row of chunk) {
          for (const column of columns) values.push(row[column] ?? null)
          for (const value of expressionValues) values.push(value)
        }
        return sql.unsafe(head + Array.from(chunk, () => tupleText).join(", "), values)
      },
      { discard: true }
    )
  })
