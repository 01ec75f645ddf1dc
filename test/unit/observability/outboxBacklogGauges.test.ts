import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer, TestClock } from "effect"
import { newId } from "../../../src/domain/Ids.js"
import type { NewOutboxEvent } from "../../../src/domain/OutboxEvent.js"
import { prometheusText } from "../../../src/http/prometheusText.js"
import { sampleOutboxBacklog } from "../../../src/services/EngineMetrics.js"
import { OutboxRepository } from "../../../src/services/outbox/OutboxRepository.js"
import { memoryRepositories } from "../../support/foundationStack.js"
import { parsePrometheusText, sampleValue } from "../../support/prometheusParser.js"

const eventOf = (lane: "enqueue" | "notify") =>
  Effect.map(newId, (id): NewOutboxEvent => ({
    id,
    eventType: lane === "enqueue" ? "ai.job.enqueue" : "ai.job.succeeded",
    aggregateType: "AiJob",
    aggregateId: id,
    dedupeKey: `gauges:${id}`,
    payload: { jobId: id },
    delay: Duration.zero,
    lane
  }))

describe("the outbox backlog gauges", () => {
  it.effect("ai_outbox_* show the enqueue lane only, ai_events_* the notify lane's completion events", () =>
    Effect.gen(function*() {
      const outbox = yield* OutboxRepository
      yield* TestClock.setTime(10_000)
      const job = yield* eventOf("enqueue")
      const givenUp = yield* eventOf("notify")
      yield* outbox.createInTransaction(job)
      yield* outbox.createInTransaction(givenUp)
      yield* outbox.claimBatch("d-gauges", 1, "notify")
      yield* outbox.settleDelivery(givenUp.id, "d-gauges", {
        _tag: "GiveUp",
        deliveredTo: [],
        error: "webhook answered 500"
      })
      yield* TestClock.adjust(300)
      // Two completion events awaiting delivery, one of them claimed.
      yield* outbox.createInTransaction(yield* eventOf("notify"))
      yield* outbox.createInTransaction(yield* eventOf("notify"))
      yield* outbox.claimBatch("d-gauges", 1, "notify")
      yield* TestClock.adjust(700)

      yield* sampleOutboxBacklog
      const scraped = parsePrometheusText(yield* prometheusText)
      const values = (names: ReadonlyArray<string>) => names.map((name) => sampleValue(scraped, name))
      expect(values(["ai_outbox_pending", "ai_outbox_dead", "ai_outbox_oldest_pending_age_seconds"])).toStrictEqual([
        1,
        0,
        1
      ])
      expect(values(["ai_events_pending", "ai_events_dead", "ai_events_oldest_pending_age_seconds"])).toStrictEqual([
        2,
        1,
        0.7
      ])
    }).pipe(Effect.provide(memoryRepositories.pipe(Layer.orDie))))
})
