import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, FiberId, Layer, Option, TestClock } from "effect"
import { leaseOf } from "../../../src/domain/AiJob.js"
import { ProviderError } from "../../../src/domain/ExecutionError.js"
import { PersistenceError } from "../../../src/domain/PersistenceError.js"
import { complete, publishFinished } from "../../../src/pipeline/complete.js"
import { prepare } from "../../../src/pipeline/prepare.js"
import { resolve } from "../../../src/pipeline/resolve.js"
import { RunOutcome } from "../../../src/pipeline/RunningJob.js"
import { recordUsage, usageEntryOf } from "../../../src/pipeline/usage.js"
import type { GenerateResult } from "../../../src/services/AiGateway.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { payloadFor } from "../../../src/services/JobQueue.js"
import { UsageLog } from "../../../src/services/UsageLog.js"
import { memoryEngineStack } from "../../support/engineStack.js"
import { LogCapture, LogCaptureLayer } from "../../support/logCapture.js"
import { createEcho, jobNow, withEvents } from "../../support/pipelineFixtures.js"

/** A job of `synthetic_echo` as PREPARE (locked by `worker-1`) and RESOLVE leave it. */
const resolvedEcho = (message: string) =>
  Effect.gen(function*() {
    const job = yield* createEcho(message)
    const payload = payloadFor({ jobId: job.id, jobType: job.jobType, createdAt: job.createdAt })
    const prepared = Option.getOrThrow(yield* prepare(payload, "worker-1", Duration.millis(60_000)))
    return yield* resolve(prepared)
  })

const answer: GenerateResult = {
  text: "{}",
  json: {},
  usage: { promptTokens: 1_000, completionTokens: 2_000, totalTokens: 3_000 },
  provider: "deepseek-eu",
  model: "deepseek-reasoner",
  latencyMs: 1_234.6,
  finishReason: "stop"
}

describe("the usage row of one provider call", () => {
  it.scoped("an answer: the provider's tokens, model and latency, its price, no error code", () =>
    Effect.gen(function*() {
      const resolved = yield* resolvedEcho("answered")
      const entry = yield* usageEntryOf(resolved, 3, 0, Exit.succeed(answer))
      expect(entry.id.length).toBeGreaterThan(0)
      expect({ ...entry, id: "" }).toStrictEqual({
        id: "",
        jobId: resolved.job.id,
        leaseNo: resolved.lease.leaseNo,
        attemptNo: 3,
        credentialMode: "platform_key",
        provider: "deepseek-eu",
        model: "deepseek-reasoner",
        promptTokens: 1_000,
        completionTokens: 2_000,
        totalTokens: 3_000,
        // 1 000 x 0.28 + 2 000 x 0.42 micro-units per token.
        costMicros: 1_120,
        latencyMs: 1_235,
        errorCode: null
      })
      const another = yield* usageEntryOf(resolved, 3, 0, Exit.succeed(answer))
      expect(another.id).not.toBe(entry.id)
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a failed call: no tokens, no cost, the route's model, the time it took by the clock, the error's code", () =>
    Effect.gen(function*() {
      const resolved = yield* resolvedEcho("failed")
      const startedAt = yield* TestClock.currentTimeMillis
      yield* TestClock.adjust(2_500)
      const error = new ProviderError({ code: "PROVIDER_TIMEOUT", message: "slow" })
      const entry = yield* usageEntryOf(resolved, 2, startedAt, Exit.fail(error))
      expect(entry).toMatchObject({
        attemptNo: 2,
        provider: resolved.route.provider,
        model: resolved.route.model,
        promptTokens: 0,
        completionTokens: 0,
        totalTokens: 0,
        costMicros: 0,
        latencyMs: 2_500,
        errorCode: "PROVIDER_TIMEOUT"
      })
      // A start stamped after the end (a clock step) is no negative latency.
      expect((yield* usageEntryOf(resolved, 2, startedAt + 10_000, Exit.fail(error))).latencyMs).toBe(0)
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("an interrupted call is CANCELLED; a defect is INTERNAL_ERROR", () =>
    Effect.gen(function*() {
      const resolved = yield* resolvedEcho("stopped")
      const interrupted = yield* usageEntryOf(resolved, 1, 0, Exit.interrupt(FiberId.none))
      expect(interrupted.errorCode).toBe("CANCELLED")
      const died = yield* usageEntryOf(resolved, 1, 0, Exit.die(new Error("bug")))
      expect(died.errorCode).toBe("INTERNAL_ERROR")
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a row the usage log refuses (a second row for the same call, or storage down) is logged and does not fail", () =>
    Effect.gen(function*() {
      const resolved = yield* resolvedEcho("recorded twice")
      const entry = yield* usageEntryOf(resolved, 1, 0, Exit.succeed(answer))
      yield* recordUsage(entry)
      yield* recordUsage(entry)
      const rows = yield* Effect.flatMap(UsageLog, (usage) => usage.listByJobId(resolved.job.id))
      expect(rows.map((row) => row.id)).toStrictEqual([entry.id])
      const down = Layer.succeed(UsageLog, {
        record: () => Effect.fail(new PersistenceError({ operation: "ai_usage_log.insert", message: "down" })),
        listByJobId: () => Effect.succeed([])
      })
      expect(Exit.isSuccess(yield* Effect.exit(recordUsage(entry).pipe(Effect.provide(down))))).toBe(true)
    }).pipe(Effect.provide(memoryEngineStack())))
})

describe("COMPLETE when its write is refused", () => {
  it.scoped("a failure on a lease taken over meanwhile: nothing written, nothing published, the run ends quietly", () =>
    withEvents((published) =>
      Effect.gen(function*() {
        const resolved = yield* resolvedEcho("taken over")
        const jobs = yield* AiJobLifecycleRepository
        yield* TestClock.adjust(61_000)
        yield* jobs.takeOver(resolved.job.id, "rescuer", Duration.millis(60_000))
        const before = published.length
        const error = new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: "503" })
        yield* complete(resolved, RunOutcome.Failed({ error, calls: 1 }))
        const job = yield* jobNow(resolved.job.id)
        expect([job.lifecycleStatus, job.lockedBy, job.errorCode]).toStrictEqual(["running", "rescuer", null])
        expect(published.slice(before)).toStrictEqual([])
      })
    ))

  it.scoped("a cancel outcome for a job with no cancel requested leaves it running and publishes nothing", () =>
    withEvents((published) =>
      Effect.gen(function*() {
        const resolved = yield* resolvedEcho("not cancelled")
        const before = published.length
        yield* complete(resolved, RunOutcome.CancelRequested())
        expect((yield* jobNow(resolved.job.id)).lifecycleStatus).toBe("running")
        expect(published.slice(before)).toStrictEqual([])
      })
    ))

  it.scoped("a hand-off of a lease already lost gives nothing back: the delivery is done, the new owner's lock stays", () =>
    withEvents(() =>
      Effect.gen(function*() {
        const resolved = yield* resolvedEcho("handed off too late")
        const jobs = yield* AiJobLifecycleRepository
        yield* TestClock.adjust(61_000)
        const taken = yield* jobs.takeOver(resolved.job.id, "rescuer", Duration.millis(60_000))
        const exit = yield* Effect.exit(complete(resolved, RunOutcome.HandedOff()))
        expect(Exit.isSuccess(exit)).toBe(true)
        const job = yield* jobNow(resolved.job.id)
        expect(leaseOf(job)).toStrictEqual(leaseOf(taken))
        expect(job.lockUntil).toStrictEqual(taken.lockUntil)
      })
    ))

  it.scoped("publishFinished announces terminal jobs only", () =>
    withEvents((published) =>
      Effect.gen(function*() {
        const resolved = yield* resolvedEcho("still running")
        const before = published.length
        yield* publishFinished(yield* jobNow(resolved.job.id))
        const queued = yield* createEcho("still queued")
        yield* publishFinished(queued)
        expect(published.slice(before)).toStrictEqual([])
        const jobs = yield* AiJobLifecycleRepository
        yield* jobs.requestCancel(queued.id)
        yield* publishFinished(yield* jobNow(queued.id))
        expect(published.slice(before).map((event) => [event.jobId, event.lifecycleStatus])).toStrictEqual([[
          queued.id,
          "cancelled"
        ]])
      })
    ))

  it.scoped("each outcome leaves its log line for the operator, annotated with the stage", () =>
    Effect.gen(function*() {
      const jobs = yield* AiJobLifecycleRepository
      const linesWith = (text: string) =>
        Effect.map(
          Effect.flatMap(LogCapture, (capture) => capture.lines),
          (lines) => lines.filter((line) => line.includes(text))
        )
      const error = new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: "503" })

      const failed = yield* resolvedEcho("fails")
      yield* complete(failed, RunOutcome.Failed({ error, calls: 2 }))
      const [jobFailed] = yield* linesWith("job failed")
      expect(jobFailed).toContain("WARN")
      expect(jobFailed).toContain("errorCode=PROVIDER_UNAVAILABLE")
      expect(jobFailed).toContain("stage=COMPLETE")
      // Again, now that the job has ended: refused.
      yield* complete(failed, RunOutcome.Failed({ error, calls: 2 }))
      const [notRecorded] = yield* linesWith("failure not recorded; the reaper will see the job")
      expect(notRecorded).toMatch(/reason=\w+/)

      const cancelled = yield* resolvedEcho("cancels")
      yield* jobs.requestCancel(cancelled.job.id)
      yield* complete(cancelled, RunOutcome.CancelRequested())
      expect(yield* linesWith("message=\"job cancelled\"")).toHaveLength(1)
      yield* complete(cancelled, RunOutcome.CancelRequested())
      const [notApplied] = yield* linesWith("cancel not applied: the job already ended")
      expect(notApplied).toMatch(/reason=\w+/)

      const lost = yield* resolvedEcho("lost")
      yield* complete(lost, RunOutcome.LockLost())
      expect(yield* linesWith("lock lost: another worker owns the job; this run's work is dropped")).toHaveLength(1)

      const handed = yield* resolvedEcho("handed")
      const given = yield* Effect.flip(complete(handed, RunOutcome.HandedOff()))
      expect(given).toMatchObject({ _tag: "JobHandedOff", reason: "worker stopping" })
      expect(yield* linesWith("job handed back: lock released for another worker")).toHaveLength(1)

      const entry = yield* usageEntryOf(handed, 1, 0, Exit.succeed(answer))
      const down = Layer.succeed(UsageLog, {
        record: () => Effect.fail(new PersistenceError({ operation: "ai_usage_log.insert", message: "down" })),
        listByJobId: () => Effect.succeed([])
      })
      yield* recordUsage(entry).pipe(Effect.provide(down))
      const [notWritten] = yield* linesWith("usage row not written")
      expect(notWritten).toContain("operation=ai_usage_log.insert")
    }).pipe(Effect.provide(LogCaptureLayer), Effect.provide(memoryEngineStack())))
})
