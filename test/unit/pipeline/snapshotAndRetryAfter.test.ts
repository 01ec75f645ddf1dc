import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Layer, Ref, TestClock } from "effect"
import { ProviderError } from "../../../src/domain/ExecutionError.js"
import { syntheticEchoDefinition } from "../../../src/jobs/synthetic_echo/definition.js"
import { retrySchedule } from "../../../src/pipeline/retrySchedule.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { ArtifactRepository } from "../../../src/services/ArtifactRepository.js"
import { ResultProjectors } from "../../../src/services/ResultProjectors.js"
import { SnapshotBuilder } from "../../../src/services/SnapshotBuilder.js"
import { awaitStatus, memoryEngineStack, startEngine } from "../../support/engineStack.js"

/** A snapshot builder that rewrites the message, so a run on the live input would show. */
const rewritingSnapshots = Layer.succeed(
  SnapshotBuilder,
  SnapshotBuilder.make({
    build: (_definition, validatedInput) =>
      Effect.succeed({
        content: Object.assign({}, validatedInput, { message: "from the snapshot" }),
        redactionVersion: "test-rewrite",
        expiresAt: new Date(8_640_000_000_000)
      })
  })
)

describe("RESOLVE and the retry schedule", () => {
  it.scoped("a job whose snapshot differs from its input runs on the snapshot", () =>
    Effect.gen(function*() {
      yield* startEngine()
      const service = yield* AiJobService
      const { job } = yield* service.createJob({
        userId: "user-1",
        jobType: "synthetic_echo",
        targetType: "test",
        targetId: "t",
        input: { message: "from the input" }
      })
      const done = yield* awaitStatus(job.id, ["succeeded", "failed", "cancelled"])
      expect(done.lifecycleStatus, done.internalErrorMessage ?? "").toBe("succeeded")
      const projector = yield* Effect.flatMap(ResultProjectors, (projectors) => projectors.get("synthetic_echo"))
      const records = yield* projector.records(done)
      const artifacts = yield* Effect.flatMap(ArtifactRepository, (repo) => repo.listByJob(job.id))
      expect(records).toStrictEqual([{ id: artifacts[0]!.artifactId, echo: "from the snapshot" }])
    }).pipe(Effect.provide(memoryEngineStack({ snapshotBuilder: rewritingSnapshots }))))

  it.effect("a retry never starts before the provider's Retry-After, even when the backoff is shorter", () =>
    Effect.gen(function*() {
      const attempts = yield* Ref.make<ReadonlyArray<number>>([])
      const call = Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const made = yield* Ref.updateAndGet(attempts, (times) => [...times, now])
        if (made.length === 1) {
          return yield* new ProviderError({ code: "PROVIDER_RATE_LIMITED", message: "429", retryAfterMs: 7_000 })
        }
        return "answered"
      })
      // The backoff starts at 1 s (jittered at most to 1.2 s): far shorter than Retry-After.
      expect(syntheticEchoDefinition.execution.retryBackoff.delay).toBe(1_000)
      const run = yield* Effect.fork(Effect.retry(call, retrySchedule(syntheticEchoDefinition)))
      yield* TestClock.adjust(6_999)
      expect(yield* Ref.get(attempts)).toHaveLength(1)
      yield* TestClock.adjust(1)
      expect(yield* Fiber.join(run)).toBe("answered")
      const [first, second] = yield* Ref.get(attempts)
      expect(second! - first!).toBe(7_000)
    }))
})
