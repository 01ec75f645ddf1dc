import { describe, expect, layer } from "@effect/vitest"
import { Duration, Effect, Option } from "effect"
import { newId } from "../../src/domain/Ids.js"
import { OutboxRepository } from "../../src/services/outbox/OutboxRepository.js"
import type { RepositoryHarness } from "./AiJobLifecycleRepository.contract.js"

const newEvent = Effect.map(newId, (id) => ({
  id,
  eventType: "ai.job.enqueue",
  aggregateType: "AiJob",
  aggregateId: id,
  dedupeKey: `filters:${id}`,
  payload: { jobId: id },
  delay: Duration.zero
}))

/** The dispatcher's edges both backings must agree on: a failure reported without the claim, long errors, empty batches. */
export const outboxFiltersContract = (harness: RepositoryHarness) =>
  describe(`OutboxRepository filters (${harness.name})`, () => {
    layer(harness.layer, { timeout: 60_000, excludeTestServices: harness.liveClock })((it) => {
      it.effect("a failure reported by a dispatcher without the claim changes nothing; the error kept is cut at 2000 characters", () =>
        Effect.gen(function*() {
          const outbox = yield* OutboxRepository
          const event = yield* newEvent
          yield* outbox.createInTransaction(event)
          const claimed = yield* outbox.claimBatch("d-owner", 10_000)
          expect(claimed.map((row) => row.id)).toContain(event.id)
          const options = { retryDelay: Duration.millis(10), maxAttempts: 3 }

          expect(yield* outbox.markDispatchFailed(event.id, "d-stranger", "not mine", options)).toStrictEqual(
            Option.none()
          )
          const untouched = Option.getOrThrow(yield* outbox.findById(event.id))
          expect([untouched.status, untouched.lockedBy, untouched.attemptCount, untouched.lastError])
            .toStrictEqual(["processing", "d-owner", 0, null])

          const longError = "x".repeat(5_000)
          expect(yield* outbox.markDispatchFailed(event.id, "d-owner", longError, options)).toStrictEqual(
            Option.some("retry_scheduled")
          )
          expect(Option.getOrThrow(yield* outbox.findById(event.id)).lastError).toBe(longError.slice(0, 2000))
          expect(yield* outbox.markPublishedMany([], "d-owner")).toBe(0)
        }))
    })
  })
