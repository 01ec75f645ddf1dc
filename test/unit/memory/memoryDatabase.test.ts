import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Either, Fiber, HashMap, Option, Ref, TestClock } from "effect"
import { PersistenceError } from "../../../src/domain/PersistenceError.js"
import {
  MemoryDatabase,
  MemoryDatabaseLive,
  type MemoryTables,
  type MemoryWrite
} from "../../../src/layers/memory/MemoryDatabase.js"

// The store under every memory repository, on rows of a scratch business table.
const table = "scratch"

const idsOf = (tables: MemoryTables): ReadonlyArray<string> =>
  Option.match(HashMap.get(tables.business, table), {
    onNone: () => [],
    onSome: (rows) => [...HashMap.keys(rows)].sort()
  })

const put = (id: string): MemoryWrite<string, never> => (tables, now) => {
  const rows = Option.getOrElse(HashMap.get(tables.business, table), () => HashMap.empty())
  return Either.right(
    [
      `${id}@${now.getTime()}`,
      { ...tables, business: HashMap.set(tables.business, table, HashMap.set(rows, id, { id, job_id: "job-1" })) }
    ] as const
  )
}

const refuse: MemoryWrite<never, string> = () => Either.left("refused")

const committedIds = Effect.flatMap(MemoryDatabase, (db) => Effect.map(db.snapshot, idsOf))
const visibleIds = Effect.flatMap(MemoryDatabase, (db) => db.read(idsOf))

/** Records every commit the observer is told about, as (ids before, ids after). */
const observe = Effect.gen(function*() {
  const db = yield* MemoryDatabase
  const commits = yield* Ref.make<ReadonlyArray<readonly [ReadonlyArray<string>, ReadonlyArray<string>]>>([])
  yield* db.setCommitObserver(
    Option.some((before, after) => Ref.update(commits, (all) => [...all, [idsOf(before), idsOf(after)] as const]))
  )
  return commits
})

const settle = Effect.repeatN(Effect.yieldNow(), 20)

describe("MemoryDatabase", () => {
  it.effect("a write outside a transaction commits at once, on the store's clock, and the observer sees it", () =>
    Effect.gen(function*() {
      const db = yield* MemoryDatabase
      const commits = yield* observe
      yield* TestClock.setTime(1_234)
      expect((yield* db.now).getTime()).toBe(1_234)
      expect(yield* db.write("scratch.put", put("a"))).toBe("a@1234")
      expect(yield* db.read((tables, now) => [idsOf(tables), now.getTime()])).toStrictEqual([["a"], 1_234])
      expect(yield* Ref.get(commits)).toStrictEqual([[[], ["a"]]])
      // A refused write changes nothing and commits nothing.
      expect(yield* Effect.either(db.write("scratch.refuse", refuse))).toStrictEqual(Either.left("refused"))
      expect(yield* committedIds).toStrictEqual(["a"])
      expect(yield* Ref.get(commits)).toHaveLength(1)
      yield* db.setCommitObserver(Option.none())
      yield* db.write("scratch.put", put("b"))
      expect(yield* Ref.get(commits)).toHaveLength(1)
    }).pipe(Effect.provide(MemoryDatabaseLive)))

  it.effect("a transaction sees its own writes, publishes them together on success, and nothing on failure", () =>
    Effect.gen(function*() {
      const db = yield* MemoryDatabase
      const commits = yield* observe
      const inside = yield* db.transaction(
        Effect.gen(function*() {
          yield* db.write("scratch.put", put("a"))
          yield* db.write("scratch.put", put("b"))
          return [yield* visibleIds, yield* committedIds] as const
        })
      )
      expect(inside).toStrictEqual([["a", "b"], []])
      expect(yield* committedIds).toStrictEqual(["a", "b"])
      expect(yield* Ref.get(commits)).toStrictEqual([[[], ["a", "b"]]])
      const failed = yield* Effect.either(
        db.transaction(Effect.zipRight(db.write("scratch.put", put("c")), Effect.fail("rolled back")))
      )
      expect(failed).toStrictEqual(Either.left("rolled back"))
      const refused = yield* Effect.either(
        db.transaction(Effect.zipRight(db.write("scratch.put", put("d")), db.write("scratch.refuse", refuse)))
      )
      expect(refused).toStrictEqual(Either.left("refused"))
      expect(yield* committedIds).toStrictEqual(["a", "b"])
      expect(yield* Ref.get(commits)).toHaveLength(1)
    }).pipe(Effect.provide(MemoryDatabaseLive)))

  it.effect("a failed nested transaction undoes only its own writes; the outer one commits once", () =>
    Effect.gen(function*() {
      const db = yield* MemoryDatabase
      const commits = yield* observe
      yield* db.transaction(
        Effect.gen(function*() {
          yield* db.write("scratch.put", put("outer"))
          const inner = yield* Effect.either(
            db.transaction(Effect.zipRight(db.write("scratch.put", put("inner")), Effect.fail("no")))
          )
          expect(inner).toStrictEqual(Either.left("no"))
          yield* db.transaction(db.write("scratch.put", put("kept")))
          expect(yield* visibleIds).toStrictEqual(["kept", "outer"])
          expect(yield* committedIds).toStrictEqual([])
        })
      )
      expect(yield* committedIds).toStrictEqual(["kept", "outer"])
      expect(yield* Ref.get(commits)).toStrictEqual([[[], ["kept", "outer"]]])
    }).pipe(Effect.provide(MemoryDatabaseLive)))

  it.effect("writes are serialized: a write waits for a transaction in progress, and neither is lost", () =>
    Effect.gen(function*() {
      const db = yield* MemoryDatabase
      const wrote = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const transaction = yield* Effect.fork(
        db.transaction(
          Effect.zipRight(
            db.write("scratch.put", put("tx")),
            Effect.zipRight(Deferred.succeed(wrote, undefined), Deferred.await(release))
          )
        )
      )
      yield* Deferred.await(wrote)
      const plain = yield* Effect.fork(db.write("scratch.put", put("plain")))
      const another = yield* Effect.fork(db.transaction(db.write("scratch.put", put("other-tx"))))
      yield* settle
      expect(Option.isNone(yield* Fiber.poll(plain))).toBe(true)
      expect(Option.isNone(yield* Fiber.poll(another))).toBe(true)
      expect(yield* committedIds).toStrictEqual([])
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(transaction)
      yield* Fiber.join(plain)
      yield* Fiber.join(another)
      expect(yield* committedIds).toStrictEqual(["other-tx", "plain", "tx"])
    }).pipe(Effect.provide(MemoryDatabaseLive)))

  it.effect("injected faults refuse reads, writes (by their operation) and commits until they are cleared", () =>
    Effect.gen(function*() {
      const db = yield* MemoryDatabase
      const commits = yield* observe
      const failing = yield* Ref.make<ReadonlyArray<string>>([])
      yield* db.setFaults(
        Option.some((operation) =>
          Effect.map(
            Ref.get(failing),
            (all) => (all.includes(operation) ? Option.some(`${operation} refused`) : Option.none())
          )
        )
      )
      const failureOf = <A, E>(effect: Effect.Effect<A, E>) =>
        Effect.map(
          Effect.either(effect),
          Either.match({
            onLeft: (
              error
            ) => (error instanceof PersistenceError ? [error.operation, error.message] : ["other", String(error)]),
            onRight: () => ["done"]
          })
        )
      expect(yield* failureOf(db.write("scratch.put", put("a")))).toStrictEqual(["done"])
      yield* Ref.set(failing, ["read"])
      expect(yield* failureOf(db.read(idsOf))).toStrictEqual(["read", "read refused"])
      expect(yield* failureOf(db.write("scratch.put", put("b")))).toStrictEqual(["done"])
      yield* Ref.set(failing, ["write"])
      expect(yield* failureOf(db.write("scratch.put", put("c")))).toStrictEqual(["scratch.put", "write refused"])
      expect(yield* failureOf(db.read(idsOf))).toStrictEqual(["done"])
      yield* Ref.set(failing, ["commit"])
      expect(yield* failureOf(db.transaction(db.write("scratch.put", put("d"))))).toStrictEqual([
        "commit",
        "commit refused"
      ])
      expect(yield* committedIds).toStrictEqual(["a", "b"])
      yield* db.setFaults(Option.none())
      expect(yield* failureOf(db.transaction(db.write("scratch.put", put("e"))))).toStrictEqual(["done"])
      expect(yield* committedIds).toStrictEqual(["a", "b", "e"])
      expect((yield* Ref.get(commits)).map(([, after]) => after)).toStrictEqual([["a"], ["a", "b"], ["a", "b", "e"]])
    }).pipe(Effect.provide(MemoryDatabaseLive)))
})
