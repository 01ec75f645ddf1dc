import { Clock, Context, Effect, Either, FiberRef, HashMap, Layer, Option, Ref } from "effect"
import type { AiJob } from "../../domain/AiJob.js"
import type { JobBatchRecord } from "../../domain/JobBatch.js"
import type { JobSnapshot } from "../../domain/JobSnapshot.js"
import type { OutboxEvent } from "../../domain/OutboxEvent.js"
import { PersistenceError } from "../../domain/PersistenceError.js"

/** Row shapes of the tables that have no domain class of their own (columns, camelCased). */
export interface ArtifactRow {
  readonly id: string
  readonly jobId: string
  readonly artifactType: string
  readonly artifactId: string
  readonly ordinal: number
  readonly createdAt: Date
}

export interface UsageLogRow {
  readonly id: string
  readonly jobId: string
  readonly leaseNo: number
  readonly attemptNo: number
  readonly credentialMode: string
  readonly provider: string
  readonly model: string
  readonly promptTokens: number
  readonly completionTokens: number
  readonly totalTokens: number
  readonly costMicros: number
  readonly latencyMs: number
  readonly errorCode: string | null
  readonly createdAt: Date
}

export interface CredentialRow {
  readonly id: string
  readonly userId: string
  readonly provider: string
  readonly encryptedKey: string
  readonly iv: string
  readonly authTag: string
  readonly keyVersion: number
  readonly keyFingerprint: string
  readonly revokedAt: Date | null
  readonly createdAt: Date
  readonly updatedAt: Date
}

/** A business row written by a projector (`flashcard`, `learning_evaluation`, ...), keyed by its SQL column names. */
export type BusinessRow = Readonly<Record<string, unknown>> & { readonly id: string; readonly job_id: string }

/** Every table of the schema, as persistent maps keyed by primary key, plus unique-key indexes. */
export interface MemoryTables {
  readonly aiJob: HashMap.HashMap<string, AiJob>
  /** `user_id|job_type|idempotency_key` → job id */
  readonly aiJobByIdempotencyKey: HashMap.HashMap<string, string>
  /** `ai_job_batch` by its unique key, `user_id|job_type|idempotency_key` */
  readonly aiJobBatchByIdempotencyKey: HashMap.HashMap<string, JobBatchRecord>
  readonly aiJobSnapshot: HashMap.HashMap<string, JobSnapshot>
  readonly aiJobArtifact: HashMap.HashMap<string, ArtifactRow>
  readonly outboxEvent: HashMap.HashMap<string, OutboxEvent>
  /** `dedupe_key` → event id */
  readonly outboxEventByDedupeKey: HashMap.HashMap<string, string>
  readonly aiUsageLog: HashMap.HashMap<string, UsageLogRow>
  readonly userModelCredential: HashMap.HashMap<string, CredentialRow>
  /** Business tables by name, each keyed by primary key. */
  readonly business: HashMap.HashMap<string, HashMap.HashMap<string, BusinessRow>>
}

export const emptyTables: MemoryTables = {
  aiJob: HashMap.empty(),
  aiJobByIdempotencyKey: HashMap.empty(),
  aiJobBatchByIdempotencyKey: HashMap.empty(),
  aiJobSnapshot: HashMap.empty(),
  aiJobArtifact: HashMap.empty(),
  outboxEvent: HashMap.empty(),
  outboxEventByDedupeKey: HashMap.empty(),
  aiUsageLog: HashMap.empty(),
  userModelCredential: HashMap.empty(),
  business: HashMap.empty()
}

/**
 * A change to the tables: either the new tables and a result, or an error and no change.
 * `now` is the store's clock (Effect's `Clock`), the memory twin of MySQL's `UTC_TIMESTAMP(3)`.
 */
export type MemoryWrite<A, E> = (tables: MemoryTables, now: Date) => Either.Either<readonly [A, MemoryTables], E>

/**
 * Fault injection for simulations: consulted before every read and write, it may refuse the
 * operation (a transient database error) by returning a message.
 */
export type MemoryFaults = (operation: "read" | "write" | "commit") => Effect.Effect<Option.Option<string>>

/**
 * Observation for simulations: called after every commit to the shared tables (a write outside
 * a transaction, or an outermost transaction), with the tables before and after, while the
 * write lock is still held, so observers see commits one at a time and in order.
 */
export type MemoryCommitObserver = (before: MemoryTables, after: MemoryTables) => Effect.Effect<void>

/**
 * The in-memory database behind every memory repository. Writes are serialized; a transaction
 * works on its own copy of the (persistent, so cheaply copied) tables and publishes it on
 * success, so concurrent readers see only committed state, as with InnoDB.
 */
export class MemoryDatabase extends Context.Tag("ai-job-engine/MemoryDatabase")<
  MemoryDatabase,
  {
    readonly now: Effect.Effect<Date>
    readonly read: <A>(f: (tables: MemoryTables, now: Date) => A) => Effect.Effect<A, PersistenceError>
    readonly write: <A, E>(operation: string, f: MemoryWrite<A, E>) => Effect.Effect<A, E | PersistenceError>
    readonly transaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | PersistenceError, R>
    /** Committed state, for tests and invariant checks. */
    readonly snapshot: Effect.Effect<MemoryTables>
    readonly setFaults: (faults: Option.Option<MemoryFaults>) => Effect.Effect<void>
    /** Simulation hook (default none): see `MemoryCommitObserver`. */
    readonly setCommitObserver: (observer: Option.Option<MemoryCommitObserver>) => Effect.Effect<void>
  }
>() {}

export const makeMemoryDatabase = Effect.gen(function*() {
  const committed = yield* Ref.make(emptyTables)
  const writeLock = yield* Effect.makeSemaphore(1)
  const currentTransaction = yield* Effect.sync(() => FiberRef.unsafeMake(Option.none<Ref.Ref<MemoryTables>>()))
  const faults = yield* Ref.make(Option.none<MemoryFaults>())
  const commitObserver = yield* Ref.make(Option.none<MemoryCommitObserver>())

  /** Publishes `next` as the committed state and tells the observer, if any. */
  const commit = (before: MemoryTables, next: MemoryTables) =>
    Effect.zipRight(
      Ref.set(committed, next),
      Effect.flatMap(
        Ref.get(commitObserver),
        Option.match({ onNone: () => Effect.void, onSome: (observe) => observe(before, next) })
      )
    )

  const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

  const checkFault = (operation: "read" | "write" | "commit", name: string) =>
    Ref.get(faults).pipe(
      Effect.flatMap(
        Option.match({
          onNone: () => Effect.void,
          onSome: (inject) =>
            inject(operation).pipe(
              Effect.flatMap(
                Option.match({
                  onNone: () => Effect.void,
                  onSome: (message) => Effect.fail(new PersistenceError({ operation: name, message }))
                })
              )
            )
        })
      )
    )

  const read = <A>(f: (tables: MemoryTables, now: Date) => A) =>
    Effect.gen(function*() {
      yield* checkFault("read", "read")
      const transaction = yield* FiberRef.get(currentTransaction)
      const tables = yield* Option.match(transaction, { onNone: () => Ref.get(committed), onSome: Ref.get })
      return f(tables, yield* now)
    })

  const apply = <A, E>(target: Ref.Ref<MemoryTables>, f: MemoryWrite<A, E>) =>
    Effect.gen(function*() {
      const before = yield* Ref.get(target)
      const result = f(before, yield* now)
      if (Either.isLeft(result)) return yield* Effect.fail(result.left)
      const [value, next] = result.right
      if (target === committed) yield* commit(before, next)
      else yield* Ref.set(target, next)
      return value
    })

  const write = <A, E>(operation: string, f: MemoryWrite<A, E>) =>
    Effect.gen(function*() {
      yield* checkFault("write", operation)
      const transaction = yield* FiberRef.get(currentTransaction)
      return yield* Option.match(transaction, {
        onNone: () => writeLock.withPermits(1)(apply(committed, f)),
        onSome: (tables) => apply(tables, f)
      })
    })

  const runOn = <A, E, R>(effect: Effect.Effect<A, E, R>, parent: Ref.Ref<MemoryTables>) =>
    Effect.gen(function*() {
      const working = yield* Ref.make(yield* Ref.get(parent))
      const result = yield* Effect.locally(effect, currentTransaction, Option.some(working))
      yield* checkFault("commit", "commit")
      const next = yield* Ref.get(working)
      if (parent === committed) yield* commit(yield* Ref.get(committed), next)
      else yield* Ref.set(parent, next)
      return result
    })

  const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | PersistenceError, R> =>
    Effect.flatMap(FiberRef.get(currentTransaction), (outer) =>
      Option.match(outer, {
        // A nested transaction is a savepoint on its parent's copy.
        onSome: (parent) => runOn(effect, parent),
        onNone: () => writeLock.withPermits(1)(runOn(effect, committed))
      }))

  return MemoryDatabase.of({
    now,
    read,
    write,
    transaction,
    snapshot: Ref.get(committed),
    setFaults: (next) => Ref.set(faults, next),
    setCommitObserver: (next) => Ref.set(commitObserver, next)
  })
})

export const MemoryDatabaseLive = Layer.effect(MemoryDatabase, makeMemoryDatabase)
