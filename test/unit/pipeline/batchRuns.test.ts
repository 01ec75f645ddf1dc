import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { ArtifactRepository } from "../../../src/services/ArtifactRepository.js"
import { UsageLog } from "../../../src/services/UsageLog.js"
import { awaitStatus, memoryEngineStack, recordsOf, startEngine } from "../../support/engineStack.js"

describe("a batch's jobs run like any others (memory layers, TestClock)", () => {
  it.scoped("every job of a batch of 12 runs to succeeded, each with its own item's projection and one usage row", () =>
    Effect.gen(function*() {
      yield* startEngine()
      const service = yield* AiJobService
      const usage = yield* UsageLog
      const artifacts = yield* ArtifactRepository
      const items = Array.from({ length: 12 }, (_, index) => ({
        targetType: "flashcard_deck",
        targetId: `deck-${index}`,
        input: {
          sourceText: `Fact ${index}: light drives photosynthesis in chloroplasts.`,
          count: 1,
          deckId: `deck-${index}`
        }
      }))
      const { created, jobs } = yield* service.createJobBatch({
        userId: "user-1",
        jobType: "flashcard_generation",
        items
      })
      expect(created).toBe(true)
      expect(jobs.map((job) => job.targetId)).toEqual(items.map((item) => item.targetId))
      for (const [index, job] of jobs.entries()) {
        const done = yield* awaitStatus(job.id, ["succeeded", "failed", "cancelled"])
        expect(done.lifecycleStatus, done.internalErrorMessage ?? "").toBe("succeeded")
        expect((yield* usage.listByJobId(job.id)).map((row) => row.errorCode)).toEqual([null])
        const records = yield* recordsOf(job.id)
        expect(records[0]).toMatchObject({ deckId: `deck-${index}` })
        expect((yield* artifacts.listByJob(job.id)).length).toBe(records.length)
      }
    }).pipe(Effect.provide(memoryEngineStack())))
})
