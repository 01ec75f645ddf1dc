import { Effect, Either, HashMap, Layer, Option } from "effect"
import { ProjectionStore } from "../../services/ProjectionStore.js"
import { type BusinessRow, MemoryDatabase } from "./MemoryDatabase.js"

const uniqueKeyOf = (row: Readonly<Record<string, unknown>>, columns: ReadonlyArray<string>) =>
  JSON.stringify(columns.map((column) => row[column] ?? null))

/** Business tables in memory, with the primary key and the declared unique key enforced. */
export const MemoryProjectionStore = Layer.effect(
  ProjectionStore,
  Effect.gen(function*() {
    const db = yield* MemoryDatabase
    return ProjectionStore.of({
      insert: (table, rows, options) =>
        db.write(`${table}.insert`, (tables, now) => {
          let stored = Option.getOrElse(HashMap.get(tables.business, table), () => HashMap.empty<string, BusinessRow>())
          const taken = new Set(Array.from(HashMap.values(stored), (row) => uniqueKeyOf(row, options.uniqueBy)))
          let inserted = 0
          for (const row of rows) {
            const key = uniqueKeyOf(row, options.uniqueBy)
            if (HashMap.has(stored, row.id) || (options.uniqueBy.length > 0 && taken.has(key))) continue
            stored = HashMap.set(stored, row.id, { created_at: now, ...row })
            taken.add(key)
            inserted += 1
          }
          return Either.right(
            [
              { inserted, duplicates: rows.length - inserted },
              { ...tables, business: HashMap.set(tables.business, table, stored) }
            ] as const
          )
        }),
      findByJob: (table, jobId, options) =>
        db.read((tables) =>
          Array.from(
            HashMap.values(
              Option.getOrElse(HashMap.get(tables.business, table), () => HashMap.empty<string, BusinessRow>())
            )
          )
            .filter((row) => row.job_id === jobId)
            .sort((a, b) => {
              const x = a[options.orderBy]
              const y = b[options.orderBy]
              return typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y))
            })
        )
    })
  })
)
