import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, HashMap, Layer } from "effect"
import { AiJob, byLease, leaseOf } from "../../src/domain/AiJob.js"
import { finishedEventFor, finishedEventId } from "../../src/domain/JobFinishedEvent.js"
import { MemoryDatabase, type MemoryTables } from "../../src/layers/memory/MemoryDatabase.js"
import { insertOutboxEvent } from "../../src/layers/memory/MemoryOutboxRepository.js"
import { AiJobLifecycleRepository } from "../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../src/services/AiJobService.js"
import { invariantNames, makeMonitor } from "../../src/simulation/invariants.js"
import { makeTrace } from "../../src/simulation/trace.js"
import { jobCreation, memoryRepositories } from "../support/foundationStack.js"

/** The monitor's verdict on one committed state. */
const violationIn = (tables: MemoryTables) => {
  const monitor = makeMonitor({
    minRetryGapMs: {},
    cancellable: new Set(),
    reaperGraceMs: 0,
    now: () => 0,
    trace: makeTrace(() => 0),
    concurrencyLimits: {},
    cancelStopMs: 0
  })
  monitor.checkState(tables)
  return monitor.violation()?.invariant
}

const createJob = Effect.flatMap(
  AiJobService,
  (service) =>
    service.createJob({
      userId: "u",
      jobType: "synthetic_echo",
      targetType: "t",
      targetId: "t",
      input: { message: "m" }
    })
).pipe(
  Effect.map(({ job }) => job)
)

describe("simulation invariant: one terminal event per terminal job", () => {
  it.effect("holds for jobs ended by the repository; breaks for a terminal job without its event and for an event of a rolled-back write", () =>
    Effect.gen(function*() {
      const repo = yield* AiJobLifecycleRepository
      const db = yield* MemoryDatabase
      const ended = yield* createJob
      const running = yield* repo.lockJob(ended.id, "w", Duration.millis(60_000))
      yield* repo.markFailed(byLease(leaseOf(running)!), {
        errorCode: "PROVIDER_UNAVAILABLE",
        publicErrorMessage: "p",
        internalErrorMessage: "i"
      })
      const cancelled = yield* createJob
      yield* repo.requestCancel(cancelled.id)
      const stillRunning = yield* repo.lockJob((yield* createJob).id, "w", Duration.millis(60_000))
      const tables = yield* db.snapshot
      expect(violationIn(tables)).toBeUndefined()

      // A terminal state whose event went missing.
      const withoutEvent = { ...tables, outboxEvent: HashMap.remove(tables.outboxEvent, finishedEventId(cancelled.id)) }
      expect(violationIn(withoutEvent)).toBe(invariantNames.oneTerminalEvent)

      // The event of a success whose transaction rolled back: the job is still running.
      const rolledBack = new AiJob({ ...stillRunning, lifecycleStatus: "succeeded", finishedAt: new Date(0) }, {
        disableValidation: true
      })
      const [, withStrayEvent] = insertOutboxEvent(tables, finishedEventFor(rolledBack, [])!, new Date(0))
      expect(violationIn(withStrayEvent)).toBe(invariantNames.oneTerminalEvent)
    }).pipe(Effect.provide(jobCreation(memoryRepositories).pipe(Layer.orDie))))
})
