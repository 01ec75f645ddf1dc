import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Option, TestClock } from "effect"
import { leaseOf } from "../../../src/domain/AiJob.js"
import { SyntheticGatewayControl } from "../../../src/layers/gateway/SyntheticGateway.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { awaitStatus, memoryEngineStack, settle, startEngine } from "../../support/engineStack.js"

const heartbeatMs = 2_000
const lockTtlMs = 6_000

const createEcho = (message: string) =>
  Effect.flatMap(
    AiJobService,
    (service) =>
      service.createJob({
        userId: `user-${message}`,
        jobType: "synthetic_echo",
        targetType: "test",
        targetId: "t",
        input: { message }
      })
  ).pipe(
    Effect.map(({ job }) => job)
  )

const reload = (jobId: string) =>
  Effect.flatMap(AiJobLifecycleRepository, (jobs) => jobs.findById(jobId)).pipe(Effect.map(Option.getOrThrow))

describe("the lease keeper (memory layers, TestClock)", () => {
  it.scoped("the keeper's beats extend the lease of every job the worker runs, past the first lock's end", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      yield* control.script([{ _tag: "Hang" }, { _tag: "Hang" }])
      yield* startEngine()
      const jobs = yield* Effect.forEach(["a", "b"], createEcho)
      for (const job of jobs) yield* awaitStatus(job.id, ["running"], { stepMs: 10 })
      const locked = yield* Effect.forEach(jobs, (job) => reload(job.id))
      // Three TTLs later (within the call's 30 s timeout) every job still runs under its first lease, with the call's progress.
      for (let beat = 0; beat < (3 * lockTtlMs) / heartbeatMs; beat++) {
        yield* TestClock.adjust(heartbeatMs)
        yield* settle
      }
      for (const [index, job] of locked.entries()) {
        const now = yield* reload(job.id)
        expect([now.lifecycleStatus, now.leaseNo, now.progress]).toStrictEqual(["running", job.leaseNo, 20])
        expect(now.lockUntil!.getTime()).toBeGreaterThan(locked[index]!.lockUntil!.getTime() + 2 * lockTtlMs)
      }
      expect(yield* control.calls).toStrictEqual([])
    }).pipe(
      Effect.provide(
        memoryEngineStack({
          timing: { jobHeartbeatInterval: Duration.millis(heartbeatMs), jobLockTtl: Duration.millis(lockTtlMs) }
        })
      )
    ))

  it.scoped("a lease taken by another worker stops its run at the next beat: the call is interrupted and nothing is written", () =>
    Effect.gen(function*() {
      const control = yield* SyntheticGatewayControl
      const repo = yield* AiJobLifecycleRepository
      yield* control.script([{ _tag: "Hang" }])
      yield* startEngine()
      const job = yield* createEcho("zombie")
      const running = yield* awaitStatus(job.id, ["running"], { stepMs: 10 })
      yield* settle
      // Another worker takes the job (a hand-off then a takeover): this worker's lease is fenced out.
      yield* repo.releaseLock(leaseOf(running)!)
      const rescued = yield* repo.takeOver(job.id, "rescuer", Duration.millis(lockTtlMs))
      yield* TestClock.adjust(heartbeatMs)
      yield* settle
      expect((yield* control.calls).map((call) => [call.jobId, call.outcome])).toStrictEqual([[job.id, "interrupted"]])
      const after = yield* reload(job.id)
      expect([after.lifecycleStatus, after.lockedBy, after.leaseNo, after.lockUntil]).toStrictEqual([
        "running",
        "rescuer",
        rescued.leaseNo,
        rescued.lockUntil
      ])
    }).pipe(
      Effect.provide(
        memoryEngineStack({
          timing: { jobHeartbeatInterval: Duration.millis(heartbeatMs), jobLockTtl: Duration.millis(lockTtlMs) }
        })
      )
    ))
})
