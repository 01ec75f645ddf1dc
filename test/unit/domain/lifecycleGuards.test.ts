import { describe, expect, it } from "@effect/vitest"
import { Duration, Either, Option } from "effect"
import { AiJob, byExpiredLock, byLease, leaseOf } from "../../../src/domain/AiJob.js"
import { IllegalTransition } from "../../../src/domain/LifecycleErrors.js"
import { fenceGuard, leaseGuard, succeedGuard, takeOverGuard } from "../../../src/domain/LifecycleGuards.js"

const now = new Date(Date.UTC(2026, 0, 1, 12, 0, 0))
const at = (offsetMs: number) => new Date(now.getTime() + offsetMs)

const runningJob = (overrides: Partial<ConstructorParameters<typeof AiJob>[0]> = {}) =>
  new AiJob({
    id: "job-1",
    userId: "user-1",
    jobType: "synthetic_echo",
    targetType: "note",
    targetId: "note-1",
    idempotencyKey: null,
    requestHash: null,
    status: "processing",
    lifecycleStatus: "running",
    queueName: "ai-interactive",
    priority: 0,
    progress: 0,
    input: { message: "hi" },
    credentialMode: "platform_key",
    credentialId: null,
    promptVersion: "v1",
    inputSchemaVersion: "v1",
    outputSchemaVersion: "v1",
    attemptCount: 2,
    maxAttempts: 3,
    leaseNo: 4,
    lockedBy: "worker-a",
    lockedAt: at(-10_000),
    lockUntil: at(0),
    cancelRequestedAt: null,
    startedAt: at(-10_000),
    finishedAt: null,
    errorCode: null,
    publicErrorMessage: null,
    internalErrorMessage: null,
    outputHash: null,
    createdAt: at(-20_000),
    updatedAt: at(-10_000),
    ...overrides
  })

const tagOf = <A, E extends { readonly _tag: string }>(result: Either.Either<A, E>) =>
  Either.match(result, { onLeft: (error) => error._tag, onRight: () => "Right" })

describe("lifecycle guards", () => {
  it("a lease exists only for a running job with an owner", () => {
    expect(leaseOf(runningJob())).toStrictEqual({ jobId: "job-1", workerId: "worker-a", attempt: 2, leaseNo: 4 })
    expect(leaseOf(runningJob({ lockedBy: null }))).toBeUndefined()
    expect(leaseOf(runningJob({ lifecycleStatus: "queued", status: "pending" }))).toBeUndefined()
  })

  it("a lease holds only for the same owner and the same lease number", () => {
    const job = Option.some(runningJob())
    expect(tagOf(leaseGuard({ jobId: "job-1", workerId: "worker-a", attempt: 2, leaseNo: 4 }, job, "succeeded"))).toBe(
      "Right"
    )
    expect(tagOf(leaseGuard({ jobId: "job-1", workerId: "worker-a", attempt: 2, leaseNo: 3 }, job, "succeeded"))).toBe(
      "LockLost"
    )
    expect(tagOf(leaseGuard({ jobId: "job-1", workerId: "worker-b", attempt: 2, leaseNo: 4 }, job, "succeeded"))).toBe(
      "LockLost"
    )
  })

  it("the reaper's fence needs the lock expired beyond the grace period, in the lease it saw", () => {
    const grace = 1_000
    const fence = byExpiredLock(runningJob(), Duration.millis(grace))
    const guard = (lockUntil: Date, leaseNo = 4) =>
      tagOf(fenceGuard(fence, Option.some(runningJob({ lockUntil, leaseNo })), now, "failed"))
    expect(guard(at(-grace))).toBe("LockLost")
    expect(guard(at(-grace / 2))).toBe("LockLost")
    expect(guard(at(-grace - 1))).toBe("Right")
    expect(guard(at(-grace - 1), 5)).toBe("LockLost")
    expect(
      tagOf(
        fenceGuard(fence, Option.some(runningJob({ lifecycleStatus: "succeeded", status: "completed" })), now, "failed")
      )
    )
      .toBe("IllegalTransition")
  })

  it("a lease fence ignores lock expiry", () => {
    const fence = byLease({ jobId: "job-1", workerId: "worker-a", attempt: 2, leaseNo: 4 })
    expect(tagOf(fenceGuard(fence, Option.some(runningJob({ lockUntil: at(60_000) })), now, "succeeded"))).toBe("Right")
  })

  it("a takeover needs a running job whose lock has expired, with attempts left", () => {
    const guard = (overrides: Partial<ConstructorParameters<typeof AiJob>[0]>) =>
      tagOf(takeOverGuard("job-1", Option.some(runningJob(overrides)), now))
    expect(guard({ lockUntil: at(0) })).toBe("JobLockConflict")
    expect(guard({ lockUntil: at(-1) })).toBe("Right")
    expect(guard({ lockUntil: at(-1), attemptCount: 3 })).toBe("AttemptsExhausted")
    expect(guard({ lifecycleStatus: "queued", status: "pending", lockedBy: null })).toBe("JobLockConflict")
    expect(guard({ lifecycleStatus: "failed", status: "failed" })).toBe("IllegalTransition")
    expect(tagOf(takeOverGuard("job-1", Option.none(), now))).toBe("JobNotFound")
  })

  it("a success needs the lease and, for a cancellable job, no cancel requested", () => {
    const lease = { jobId: "job-1", workerId: "worker-a", attempt: 2, leaseNo: 4 }
    const cancelRequested = Option.some(runningJob({ cancelRequestedAt: at(-1) }))
    expect(tagOf(succeedGuard(lease, cancelRequested, true))).toBe("CancelRequestedBeforeSuccess")
    expect(tagOf(succeedGuard(lease, cancelRequested, false))).toBe("Right")
    expect(tagOf(succeedGuard({ ...lease, leaseNo: 5 }, cancelRequested, false))).toBe("LockLost")
    const finished = succeedGuard(
      lease,
      Option.some(runningJob({ lifecycleStatus: "cancelled", status: "cancelled" })),
      true
    )
    expect(Either.getLeft(finished)).toStrictEqual(
      Option.some(new IllegalTransition({ jobId: "job-1", from: "cancelled", to: "succeeded" }))
    )
  })

  it("an owned running row without a lock expiry counts as expired, for a takeover and for the reaper", () => {
    const unbounded = runningJob({ lockUntil: null })
    expect(tagOf(takeOverGuard("job-1", Option.some(unbounded), now))).toBe("Right")
    expect(
      tagOf(fenceGuard(byExpiredLock(runningJob(), Duration.millis(1_000)), Option.some(unbounded), now, "failed"))
    ).toBe("Right")
  })
})
