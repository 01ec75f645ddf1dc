import { describe, expect, layer } from "@effect/vitest"
import { Duration, Effect, Either, Layer, Option } from "effect"
import { byLease, leaseOf } from "../../src/domain/AiJob.js"
import { newId } from "../../src/domain/Ids.js"
import { MemoryDatabase } from "../../src/layers/memory/MemoryDatabase.js"
import { AiJobLifecycleRepository } from "../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../src/services/AiJobService.js"
import { OutboxRepository } from "../../src/services/outbox/OutboxRepository.js"
import { jobCreation, memoryRepositories } from "../support/foundationStack.js"

/** The operation a failed call names, or what came instead of a PersistenceError. */
const failureOf = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.map(
    Effect.either(effect),
    (result) =>
      Either.isLeft(result) && typeof result.left === "object" && result.left !== null && "operation" in result.left
        ? result.left.operation
        : `not a PersistenceError: ${JSON.stringify(Either.isLeft(result) ? result.left : result.right)}`
  )

/** Every write fails from here on, as a lost database would make it (the simulation's fault switch). */
const failEveryWrite = Effect.flatMap(
  MemoryDatabase,
  (db) =>
    db.setFaults(
      Option.some((operation) => Effect.succeed(operation === "write" ? Option.some("disk gone") : Option.none()))
    )
)

describe("PersistenceError names the write that failed (memory), as on MySQL", () => {
  layer(jobCreation(memoryRepositories).pipe(Layer.orDie))((it) => {
    it.effect("every job and outbox write under a write fault", () =>
      Effect.gen(function*() {
        const repo = yield* AiJobLifecycleRepository
        const outbox = yield* OutboxRepository
        const { job } = yield* (yield* AiJobService).createJob({
          userId: `u-${yield* newId}`,
          jobType: "synthetic_echo",
          targetType: "test",
          targetId: "t-1",
          input: { message: "hello" }
        })
        const running = yield* repo.lockJob(job.id, "worker-a", Duration.millis(60_000))
        const lease = leaseOf(running)!
        yield* failEveryWrite
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
          ["ai_job.create", repo.createJob({ ...job, id: yield* newId, idempotencyKey: null, requestHash: null })],
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
          ["ai_job.touchQueued", repo.touchQueued(job)],
          ["outbox_event.create", outbox.createInTransaction(event)],
          ["outbox_event.claimBatch", outbox.claimBatch("d-1", 10)],
          ["outbox_event.markPublishedMany", outbox.markPublishedMany([id], "d-1")],
          [
            "outbox_event.markDispatchFailed",
            outbox.markDispatchFailed(id, "d-1", "down", { retryDelay: Duration.millis(10), maxAttempts: 3 })
          ],
          ["outbox_event.releaseClaimsOf", outbox.releaseClaimsOf("d-1")],
          ["outbox_event.releaseExpiredLocks", outbox.releaseExpiredLocks(Duration.millis(1_000))],
          ["outbox_event.replayDead", outbox.replayDead(id)],
          ["outbox_event.replayAllDead", outbox.replayAllDead]
        ]
        const seen = yield* Effect.forEach(calls, ([, call]) => failureOf(call))
        expect(seen).toStrictEqual(calls.map(([operation]) => operation))
      }))
  })
})
