import { describe, expect, layer } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Option } from "effect"
import { newId } from "../../src/domain/Ids.js"
import type { OutboxEvent } from "../../src/domain/OutboxEvent.js"
import { OutboxRepository } from "../../src/services/outbox/OutboxRepository.js"
import { UnitOfWork } from "../../src/services/UnitOfWork.js"
import type { RepositoryHarness } from "./AiJobLifecycleRepository.contract.js"

const newEvent = Effect.map(newId, (id) => ({
  id,
  eventType: "ai.job.enqueue",
  aggregateType: "AiJob",
  aggregateId: id,
  dedupeKey: `claims:${id}`,
  payload: { jobId: id },
  delay: Duration.zero
}))

/**
 * Two dispatchers claiming the same events at once: the claim is a compare-and-set on the
 * event's status, whatever each dispatcher read before it wrote.
 */
export const outboxClaimsContract = (harness: RepositoryHarness) =>
  describe(`OutboxRepository claims (${harness.name})`, () => {
    layer(harness.layer, { timeout: 60_000, excludeTestServices: harness.liveClock })((it) => {
      it.effect("a dispatcher that read events as pending while another's claim of them was uncommitted gets none of them", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          const unitOfWork = yield* UnitOfWork
          // What earlier tests left pending goes first, so the claims below see only these events.
          const leftover = yield* outbox.claimBatch("claims-drain", 10_000)
          yield* outbox.markPublishedMany(leftover.map((event) => event.id), "claims-drain")
          const events = yield* Effect.forEach([1, 2, 3, 4, 5], () => newEvent)
          yield* Effect.forEach(events, outbox.createInTransaction)
          const ours = new Set(events.map((event) => event.id))

          // The first claim, made in a transaction held open: on MySQL its rows stay locked and
          // still read as pending to everyone else until it commits.
          const firstClaimed = yield* Deferred.make<ReadonlyArray<OutboxEvent>>()
          const commitFirst = yield* Deferred.make<void>()
          const first = yield* Effect.fork(unitOfWork.transaction(Effect.gen(function*() {
            yield* Deferred.succeed(firstClaimed, yield* outbox.claimBatch("claims-first", 100))
            yield* Deferred.await(commitFirst)
          })))
          const claimedByFirst = yield* Deferred.await(firstClaimed)
          expect(new Set(claimedByFirst.map((event) => event.id))).toStrictEqual(ours)

          // The second reads the same events as pending and writes its claim, which waits on the
          // first's row locks (in memory, on the transaction) and then finds them claimed.
          const second = yield* Effect.fork(outbox.claimBatch("claims-second", 100))
          yield* harness.advance(300)
          yield* Deferred.succeed(commitFirst, undefined)
          yield* Fiber.join(first)
          const claimedBySecond = yield* Fiber.join(second)
          expect(claimedBySecond.filter((event) => ours.has(event.id))).toStrictEqual([])
          for (const event of events) {
            const stored = Option.getOrThrow(yield* outbox.findById(event.id))
            expect([stored.status, stored.lockedBy]).toStrictEqual(["processing", "claims-first"])
          }
          expect(yield* outbox.markPublishedMany(events.map((event) => event.id), "claims-first")).toBe(events.length)
        }))
    })
  })
