import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Deferred, Duration, Effect, Either, Fiber, Layer, Option, Schema } from "effect"
import type { AiJob } from "../../src/domain/AiJob.js"
import { byLease, leaseOf } from "../../src/domain/AiJob.js"
import { newId } from "../../src/domain/Ids.js"
import { AiJobLifecycleRepository } from "../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../src/services/AiJobService.js"
import { OutboxRepository } from "../../src/services/outbox/OutboxRepository.js"
import { UnitOfWork } from "../../src/services/UnitOfWork.js"
import { jobCreation, mysqlRepositories } from "../support/foundationStack.js"

/**
 * What an operator reads when MySQL fails under the engine: a `PersistenceError` naming the
 * operation that failed, provoked for real on a scratch database (a table gone, a connection
 * killed mid-transaction).
 */
const stack = (prefix: string) => jobCreation(mysqlRepositories(prefix)).pipe(Layer.orDie)

/** The failure's operation and whether its message carries the driver's code, or what came instead. */
const failureOf = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.map(
    Effect.either(effect),
    (result) =>
      Either.isLeft(result) && typeof result.left === "object" && result.left !== null && "operation" in result.left
        ? result.left.operation
        : `not a PersistenceError: ${JSON.stringify(Either.isLeft(result) ? result.left : result.right)}`
  )

const renameTable = (from: string, to: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`RENAME TABLE ${from} TO ${to}`)).pipe(Effect.orDie)

const ConnectionId = Schema.Struct({ id: Schema.Number })

describe("PersistenceError names the operation that failed (mysql)", () => {
  layer(stack("errors_job"), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("every job repository call on a missing ai_job table", () =>
      Effect.gen(function*() {
        const repo = yield* AiJobLifecycleRepository
        const { job } = yield* (yield* AiJobService).createJob({
          userId: `u-${yield* newId}`,
          jobType: "synthetic_echo",
          targetType: "test",
          targetId: "t-1",
          input: { message: "hello" }
        })
        const running: AiJob = yield* repo.lockJob(job.id, "worker-a", Duration.millis(60_000))
        const lease = leaseOf(running)!
        yield* renameTable("ai_job", "ai_job_gone")
        const newJob = { ...job, id: yield* newId, idempotencyKey: null, requestHash: null }
        const calls: ReadonlyArray<readonly [string, Effect.Effect<unknown, unknown>]> = [
          ["ai_job.create", repo.createJob(newJob)],
          ["ai_job.findById", repo.findById(job.id)],
          ["ai_job.findRetriesOf", repo.findRetriesOf(job.id)],
          ["ai_job.findByIdempotencyKey", repo.findByIdempotencyKey(job.userId, job.jobType, "k")],
          ["ai_job.lock", repo.lockJob(job.id, "worker-b", Duration.millis(1_000))],
          ["ai_job.takeOver", repo.takeOver(job.id, "worker-b", Duration.millis(1_000))],
          [
            "ai_job.extendLocks",
            repo.extendLocks([{ lease, progress: 10, reportCancel: true }], Duration.millis(1_000))
          ],
          ["ai_job.releaseLock", repo.releaseLock(lease)],
          ["ai_job.markSucceeded", repo.markSucceeded(lease, "a".repeat(64), { locked: running })],
          [
            "ai_job.markFailed",
            repo.markFailed(byLease(lease), { errorCode: "X", publicErrorMessage: "x", internalErrorMessage: "x" })
          ],
          ["ai_job.markCancelled", repo.markCancelled(byLease(lease))],
          ["ai_job.requestCancel", repo.requestCancel(job.id)],
          ["ai_job.findByLifecycleStatus", repo.findByLifecycleStatus(["queued"])],
          ["ai_job.findExpiredLocks", repo.findExpiredLocks(Duration.millis(0), 10)],
          ["ai_job.findStaleQueued", repo.findStaleQueued(Duration.millis(0), 10)],
          ["ai_job.touchQueued", repo.touchQueued(job)],
          ["ai_job.list", repo.list({}, { limit: 10 })],
          ["ai_job.countActive", repo.countActive(job.userId)],
          ["ai_job.countCreatedSince", repo.countCreatedSince(job.userId, job.createdAt)]
        ]
        const seen = yield* Effect.forEach(calls, ([, call]) => failureOf(call))
        expect(seen).toStrictEqual(calls.map(([operation]) => operation))
      }))
  })

  layer(stack("errors_outbox"), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("every outbox repository call on a missing outbox_event table", () =>
      Effect.gen(function*() {
        const outbox = yield* OutboxRepository
        yield* renameTable("outbox_event", "outbox_event_gone")
        const id = yield* newId
        const event = {
          id,
          eventType: "ai.job.enqueue",
          aggregateType: "AiJob",
          aggregateId: id,
          dedupeKey: id,
          payload: {},
          delay: Duration.zero
        }
        const calls: ReadonlyArray<readonly [string, Effect.Effect<unknown, unknown>]> = [
          ["outbox_event.create", outbox.createInTransaction(event)],
          ["outbox_event.findById", outbox.findById(id)],
          ["outbox_event.claimBatch", outbox.claimBatch("d-1", 10)],
          ["outbox_event.markPublishedMany", outbox.markPublishedMany([id], "d-1")],
          [
            "outbox_event.markDispatchFailed",
            outbox.markDispatchFailed(id, "d-1", "down", { retryDelay: Duration.millis(10), maxAttempts: 3 })
          ],
          ["outbox_event.releaseClaimsOf", outbox.releaseClaimsOf("d-1")],
          ["outbox_event.releaseExpiredLocks", outbox.releaseExpiredLocks(Duration.millis(1_000))],
          ["outbox_event.countByStatus", outbox.countByStatus],
          ["outbox_event.backlogOf", outbox.backlogOf("enqueue")],
          ["outbox_event.replayDead", outbox.replayDead(id)],
          ["outbox_event.replayAllDead", outbox.replayAllDead],
          ["outbox_event.listByStatus", outbox.listByStatus("dead", { limit: 10 })],
          ["outbox_event.oldestPendingAgeMs", outbox.oldestPendingAgeMs]
        ]
        const seen = yield* Effect.forEach(calls, ([, call]) => failureOf(call))
        expect(seen).toStrictEqual(calls.map(([operation]) => operation))
      }))
  })

  layer(stack("errors_uow"), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("a driver error inside a transaction is the transaction's PersistenceError; the body's own errors pass untouched", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const uow = yield* UnitOfWork
        const broken = yield* Effect.flip(uow.transaction(sql`SELECT * FROM no_such_table`))
        expect(broken._tag).toBe("PersistenceError")
        expect(broken).toMatchObject({ operation: "transaction" })
        expect(broken.message).toContain("ER_NO_SUCH_TABLE")
        expect(yield* Effect.flip(uow.transaction(Effect.fail("the caller's own" as const)))).toBe("the caller's own")
      }))

    /**
     * The transaction's connection is killed from outside (another pool connection) once its
     * body has run, so the COMMIT or ROLLBACK that follows goes to a dead connection.
     */
    const killedBeforeTheEnd = <A, E>(ending: Effect.Effect<A, E>) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const uow = yield* UnitOfWork
        const repo = yield* AiJobLifecycleRepository
        const bodyRan = yield* Deferred.make<number>()
        const killed = yield* Deferred.make<void>()
        const userId = `killed-${yield* newId}`
        const transaction = yield* Effect.fork(uow.transaction(
          Effect.gen(function*() {
            yield* (yield* AiJobService).createJob({
              userId,
              jobType: "synthetic_echo",
              targetType: "test",
              targetId: "t",
              input: { message: "m" }
            })
            const [row] = yield* Schema.decodeUnknown(Schema.Array(ConnectionId))(
              yield* sql`SELECT CONNECTION_ID() AS id`
            )
            yield* Deferred.succeed(bodyRan, row!.id)
            yield* Deferred.await(killed)
            return yield* ending
          })
        ))
        yield* sql.unsafe(`KILL ${yield* Deferred.await(bodyRan)}`)
        yield* Deferred.succeed(killed, undefined)
        const outcome = yield* Effect.either(Fiber.join(transaction))
        // Whatever the error says about the commit, nothing of the body stands.
        expect(yield* repo.list({ userId }, { limit: 10 })).toStrictEqual([])
        return outcome
      })

    it.effect("a COMMIT on a lost connection: the outcome is unknown", () =>
      Effect.gen(function*() {
        const outcome = yield* killedBeforeTheEnd(Effect.succeed("done"))
        expect(Either.isLeft(outcome) ? Option.some(outcome.left) : Option.none()).toStrictEqual(
          Option.some(
            expect.objectContaining({
              _tag: "PersistenceError",
              operation: "transaction.commit",
              commitOutcome: "unknown"
            })
          )
        )
      }))

    it.effect("a ROLLBACK on a lost connection after the body failed", () =>
      Effect.gen(function*() {
        const outcome = yield* killedBeforeTheEnd(Effect.fail("gave up" as const))
        const error = Either.isLeft(outcome) ? outcome.left : undefined
        expect(error).toMatchObject({ _tag: "PersistenceError", operation: "transaction.rollback" })
        expect(error).not.toHaveProperty("commitOutcome", "unknown")
      }))
  })
})
