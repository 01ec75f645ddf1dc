import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option, TestClock, Tracer } from "effect"
import { newId } from "../../../src/domain/Ids.js"
import { MemoryDatabase } from "../../../src/layers/memory/MemoryDatabase.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { OutboxRepository } from "../../../src/services/outbox/OutboxRepository.js"
import { jobCreation, memoryRepositories } from "../../support/foundationStack.js"

// The outbox's read-outs are values built with the layer: built inside the test here, so a
// mutation run credits them to the test that reads them.
const stack = () => jobCreation(memoryRepositories).pipe(Layer.orDie)

const newEvent = (delayMs = 0) =>
  Effect.map(newId, (id) => ({
    id,
    eventType: "ai.job.enqueue",
    aggregateType: "AiJob",
    aggregateId: id,
    dedupeKey: `unit:${id}`,
    payload: { jobId: id },
    delay: Duration.millis(delayMs)
  }))

describe("MemoryOutboxRepository read-outs", () => {
  it.effect("counts by status, the backlog ages by the clock, and replaying every dead event", () =>
    Effect.gen(function*() {
      const outbox = yield* OutboxRepository
      yield* TestClock.setTime(10_000)
      expect(yield* outbox.countByStatus).toStrictEqual({ pending: 0, processing: 0, published: 0, failed: 0, dead: 0 })
      expect((yield* outbox.backlogOf("enqueue")).oldestUnpublishedAgeMs).toBe(0)
      expect(yield* outbox.oldestPendingAgeMs).toStrictEqual(Option.none())
      const [dead, claimed, published, pending] = yield* Effect.forEach([0, 1, 2, 3], () => newEvent())
      for (const event of [dead!, claimed!, published!]) yield* outbox.createInTransaction(event)
      yield* TestClock.adjust(100)
      yield* outbox.createInTransaction(pending!)
      yield* TestClock.adjust(50)
      const taken = yield* outbox.claimBatch("d-1", 3)
      expect(new Set(taken.map((event) => event.id))).toStrictEqual(new Set([dead!.id, claimed!.id, published!.id]))
      expect(yield* outbox.markPublishedMany([published!.id], "d-1")).toBe(1)
      expect(
        yield* outbox.markDispatchFailed(dead!.id, "d-1", "refused", { retryDelay: Duration.millis(0), maxAttempts: 1 })
      )
        .toStrictEqual(
          Option.some("dead")
        )
      expect(yield* outbox.countByStatus).toStrictEqual({ pending: 1, processing: 1, published: 1, failed: 0, dead: 1 })
      // Pending: only the one created 50 ms ago; unpublished: the claimed one too, 150 ms old.
      expect(yield* outbox.oldestPendingAgeMs).toStrictEqual(Option.some(50))
      expect((yield* outbox.backlogOf("enqueue")).oldestUnpublishedAgeMs).toBe(150)
      expect(yield* outbox.replayAllDead).toBe(1)
      const replayed = Option.getOrThrow(yield* outbox.findById(dead!.id))
      expect([replayed.status, replayed.attemptCount, replayed.lastError, replayed.availableAt.getTime()])
        .toStrictEqual([
          "pending",
          0,
          null,
          10_150
        ])
      expect(yield* outbox.oldestPendingAgeMs).toStrictEqual(Option.some(150))
      expect(yield* outbox.countByStatus).toStrictEqual({ pending: 2, processing: 1, published: 1, failed: 0, dead: 0 })
      expect(yield* outbox.replayAllDead).toBe(0)
    }).pipe(Effect.provide(stack())))

  it.effect("a failed dispatch is pending again after exactly its retry delay; a lock expires only past its TTL", () =>
    Effect.gen(function*() {
      const outbox = yield* OutboxRepository
      const event = yield* newEvent()
      yield* outbox.createInTransaction(event)
      expect((yield* outbox.claimBatch("d-1", 10)).map((row) => row.id)).toStrictEqual([event.id])
      expect(
        yield* outbox.markDispatchFailed(event.id, "d-1", "later", { retryDelay: Duration.millis(200), maxAttempts: 3 })
      )
        .toStrictEqual(
          Option.some("retry_scheduled")
        )
      const retrying = Option.getOrThrow(yield* outbox.findById(event.id))
      expect([retrying.status, retrying.attemptCount, retrying.lockedBy, retrying.lockedAt]).toStrictEqual([
        "pending",
        1,
        null,
        null
      ])
      yield* TestClock.adjust(199)
      expect(yield* outbox.claimBatch("d-1", 10)).toStrictEqual([])
      yield* TestClock.adjust(1)
      expect((yield* outbox.claimBatch("d-1", 10)).map((row) => row.id)).toStrictEqual([event.id])
      // The lock is released once it is older than the TTL, not when it is exactly that old.
      yield* TestClock.adjust(1_000)
      expect(yield* outbox.releaseExpiredLocks(Duration.millis(1_000))).toBe(0)
      yield* TestClock.adjust(1)
      expect(yield* outbox.releaseExpiredLocks(Duration.millis(1_000))).toBe(1)
      const released = Option.getOrThrow(yield* outbox.findById(event.id))
      expect([released.status, released.lockedBy, released.lockedAt, released.attemptCount]).toStrictEqual([
        "pending",
        null,
        null,
        1
      ])
    }).pipe(Effect.provide(stack())))

  it.effect("an event created with a delay is claimed once its delay has passed, not a millisecond before", () =>
    Effect.gen(function*() {
      const outbox = yield* OutboxRepository
      const event = yield* newEvent(300)
      expect(yield* outbox.createInTransaction(event)).toStrictEqual({ eventId: event.id, duplicate: false })
      yield* TestClock.adjust(299)
      expect(yield* outbox.claimBatch("d-1", 10)).toStrictEqual([])
      expect(yield* outbox.markPublishedDirect([event.id])).toBe(1)
      expect(Option.getOrThrow(yield* outbox.findById(event.id)).status).toBe("published")
      const late = yield* newEvent(300)
      yield* outbox.createInTransaction(late)
      yield* TestClock.adjust(300)
      const [claimed] = yield* outbox.claimBatch("d-1", 10)
      expect([claimed?.id, claimed?.status, claimed?.lockedBy]).toStrictEqual([late.id, "processing", "d-1"])
      // Its job does not exist: no trace context to carry.
      expect(claimed?.traceParent).toBeNull()
    }).pipe(Effect.provide(stack())))

  it.effect("only an AiJob event carries its job's trace context, even when another aggregate has the job's id", () =>
    Effect.gen(function*() {
      const outbox = yield* OutboxRepository
      const service = yield* AiJobService
      const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
      const { job } = yield* service.createJob({
        userId: "user-1",
        jobType: "synthetic_echo",
        targetType: "test",
        targetId: "trace",
        input: { message: "hello" }
      }).pipe(Effect.withParentSpan(Tracer.externalSpan({ traceId, spanId: "00f067aa0ba902b7", sampled: true })))
      expect(job.traceParent).not.toBeNull()
      const other = { ...(yield* newEvent()), aggregateType: "Invoice", aggregateId: job.id }
      yield* outbox.createInTransaction(other)
      const claimed = yield* outbox.claimBatch("d-1", 10)
      expect(claimed.map((event) => [event.aggregateType, event.traceParent])).toEqual(
        expect.arrayContaining([["AiJob", job.traceParent], ["Invoice", null]])
      )
      expect(claimed).toHaveLength(2)
    }).pipe(Effect.provide(stack())))

  it.effect("dispatch order: earliest available first, equal times by id; list order: newest first, equal times by id from the highest", () =>
    Effect.gen(function*() {
      const outbox = yield* OutboxRepository
      // Eight events created at once (ids in no particular storage order), then one later with the lowest id.
      const ids = (yield* Effect.forEach(Array.from({ length: 9 }, () => 0), () => newId)).sort()
      for (const id of [...ids.slice(1)].reverse()) yield* outbox.createInTransaction({ ...(yield* newEvent()), id })
      yield* TestClock.adjust(10)
      yield* outbox.createInTransaction({ ...(yield* newEvent()), id: ids[0]! })
      const listed = yield* outbox.listByStatus("pending", { limit: 100 })
      expect(listed.map((event) => event.id)).toStrictEqual([ids[0]!, ...ids.slice(1).reverse()])
      const page = yield* outbox.listByStatus("pending", { limit: 3, after: listed[2]! })
      expect(page.map((event) => event.id)).toStrictEqual(listed.slice(3, 6).map((event) => event.id))
      const claimed = [...(yield* outbox.claimBatch("d-1", 4)), ...(yield* outbox.claimBatch("d-1", 100))]
      expect(claimed.map((event) => event.id)).toStrictEqual([...ids.slice(1), ids[0]!])
    }).pipe(Effect.provide(stack())))

  it.effect("the oldest unpublished event may be a pending one; a published or dead one is never counted", () =>
    Effect.gen(function*() {
      const outbox = yield* OutboxRepository
      const [oldest, claimed, published] = yield* Effect.forEach([0, 1, 2], () => newEvent())
      yield* outbox.createInTransaction(oldest!)
      yield* TestClock.adjust(40)
      yield* outbox.createInTransaction(claimed!)
      yield* TestClock.adjust(20)
      expect((yield* outbox.claimBatch("d-1", 1)).map((event) => event.id)).toStrictEqual([oldest!.id])
      // Released again, the oldest unpublished event is a pending one.
      expect(yield* outbox.releaseClaimsOf("d-1")).toBe(1)
      yield* outbox.createInTransaction(published!)
      expect(yield* outbox.markPublishedDirect([published!.id])).toBe(1)
      expect((yield* outbox.backlogOf("enqueue")).oldestUnpublishedAgeMs).toBe(60)
      expect(yield* outbox.oldestPendingAgeMs).toStrictEqual(Option.some(60))
    }).pipe(Effect.provide(stack())))

  it.effect("markPublishedDirect names its write when it fails", () =>
    Effect.gen(function*() {
      const outbox = yield* OutboxRepository
      const db = yield* MemoryDatabase
      yield* db.setFaults(
        Option.some((operation) => Effect.succeed(operation === "write" ? Option.some("disk gone") : Option.none()))
      )
      const failed = yield* Effect.flip(outbox.markPublishedDirect(["e-1"]))
      expect(failed._tag === "PersistenceError" && failed.operation).toBe("outbox_event.markPublishedDirect")
    }).pipe(Effect.provide(stack())))
})
