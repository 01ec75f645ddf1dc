import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient, type Statement } from "@effect/sql"
import { MysqlClient } from "@effect/sql-mysql2"
import type { Connection } from "@effect/sql/SqlConnection"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream, String as Str } from "effect"
import { insertRows, paddedForIn, powerOfTwoChunks } from "../../../src/layers/mysql/statementShapes.js"

describe("paddedForIn: IN lists in a few shapes", () => {
  it("pads to the next power of two with the last value, keeping every value and adding no other", () => {
    expect(paddedForIn([])).toEqual([])
    expect(paddedForIn(["a"])).toEqual(["a"])
    expect(paddedForIn(["a", "b", "c"])).toEqual(["a", "b", "c", "c"])
    expect(paddedForIn(["a", "b", "c", "d"])).toEqual(["a", "b", "c", "d"])
    const lengths = new Set(
      Array.from({ length: 500 }, (_, n) => paddedForIn(Array.from({ length: n + 1 }, (_, i) => i)).length)
    )
    expect([...lengths]).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
    expect(new Set(paddedForIn([1, 2, 3, 4, 5]))).toEqual(new Set([1, 2, 3, 4, 5]))
  })
})

describe("powerOfTwoChunks: multi-row inserts in a few shapes", () => {
  it("splits into distinct powers of two, largest first, keeping every item in order", () => {
    expect(powerOfTwoChunks([])).toEqual([])
    expect(powerOfTwoChunks(["a"])).toEqual([["a"]])
    expect(powerOfTwoChunks(["a", "b", "c"])).toEqual([["a", "b"], ["c"]])
    const hundred = Array.from({ length: 100 }, (_, i) => i)
    expect(powerOfTwoChunks(hundred).map((chunk) => chunk.length)).toEqual([64, 32, 4])
    expect(powerOfTwoChunks(hundred).flat()).toEqual(hundred)
    const sizes = new Set(
      Array.from(
        { length: 100 },
        (_, n) => powerOfTwoChunks(Array.from({ length: n + 1 }, (_, i) => i)).map((c) => c.length)
      ).flat()
    )
    expect([...sizes].sort((a, b) => a - b)).toEqual([1, 2, 4, 8, 16, 32, 64])
  })
})

/** A client on MySQL's compiler (snake_case columns, as the engine's) whose connection only records what it is sent. */
const recordingClient = Effect.gen(function*() {
  const sent: Array<readonly [string, ReadonlyArray<unknown>]> = []
  const record = (text: string, params: ReadonlyArray<unknown>) =>
    Effect.sync(() => {
      sent.push([text, params])
      return []
    })
  const connection: Connection = {
    execute: record,
    executeRaw: record,
    executeStream: () => Stream.empty,
    executeValues: record,
    executeUnprepared: record
  }
  const sql = yield* SqlClient.make({
    acquirer: Effect.succeed(connection),
    compiler: MysqlClient.makeCompiler(Str.camelToSnake),
    spanAttributes: []
  })
  return { sql, sent }
}).pipe(Effect.provide(Reactivity.layer))

/** What `insertRows` sent before it put the text together itself: one fragment per value. */
const perValueFragments = (
  sql: SqlClient.SqlClient,
  table: string,
  rows: ReadonlyArray<Readonly<Record<string, unknown>>>,
  stamped: ReadonlyArray<readonly [string, Statement.Fragment]>
) => {
  const columns = Object.keys(rows[0] ?? {})
  const names = sql.csv([...columns, ...stamped.map(([column]) => column)].map((column) => sql`${sql(column)}`))
  const stampedValues = stamped.map(([, value]) => value)
  const tuple = (row: Readonly<Record<string, unknown>>) =>
    sql`(${sql.csv([...columns.map((column) => sql`${row[column] ?? null}`), ...stampedValues])})`
  return Effect.forEach(
    powerOfTwoChunks(rows),
    (chunk) => sql`INSERT INTO ${sql(table)} (${names}) VALUES ${sql.csv(chunk.map(tuple))}`,
    { discard: true }
  )
}

describe("insertRows: the text and values of the per-value fragments, put together once", () => {
  it.effect("sends the same statements and values for any count, stamped expressions with values included", () =>
    Effect.gen(function*() {
      const at = new Date("2024-05-01T10:00:00.000Z")
      const row = (i: number) => ({
        id: `job-${i}`,
        userId: i % 2 === 0 ? "u" : "v",
        inputJson: JSON.stringify({ i }),
        credentialId: i % 3 === 0 ? null : undefined,
        priority: i,
        lockedAt: i % 4 === 0 ? at : null
      })
      for (const count of [1, 2, 3, 7, 64, 100]) {
        const rows = Array.from({ length: count }, (_, i) => row(i))
        for (const stamps of [false, true]) {
          const { sent, sql } = yield* recordingClient
          const withStamps = !stamps
            ? []
            : [
              ["created_at", sql`UTC_TIMESTAMP(3)`] as const,
              ["available_at", sql`DATE_ADD(UTC_TIMESTAMP(3), INTERVAL ${2500} * 1000 MICROSECOND)`] as const,
              ["updated_at", sql`${at}`] as const
            ]
          yield* perValueFragments(sql, "ai_job", rows, withStamps)
          const expected = sent.splice(0)
          yield* insertRows(sql, "ai_job", rows, withStamps)
          expect(sent).toEqual(expected)
          expect(sent.length).toBe(powerOfTwoChunks(rows).length)
        }
      }
    }))
})
