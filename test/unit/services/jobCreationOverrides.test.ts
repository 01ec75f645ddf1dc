import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { jobCreation, memoryRepositories } from "../../support/foundationStack.js"

const createWithPriority = (priority: number) =>
  Effect.flatMap(AiJobService, (service) =>
    service.createJob({
      userId: "user-1",
      jobType: "synthetic_echo",
      targetType: "deck",
      targetId: "deck-1",
      input: { message: "hello" },
      overrides: { priority }
    }))

describe("AiJobService overrides", () => {
  // The bounds are the JobDefinition Schema's: an override obeys the same rule as a definition.
  for (const priority of [-1, 101, 2.5]) {
    it.effect(`refuses priority ${priority} with the rule, before anything is written`, () =>
      Effect.gen(function*() {
        const result = yield* Effect.either(createWithPriority(priority))
        expect(Either.isLeft(result) && result.left._tag).toBe("InvalidJobInput")
        expect(Either.isLeft(result) && "problems" in result.left ? result.left.problems : []).toStrictEqual([
          "overrides.priority: must be a whole number from 0 to 100"
        ])
      }).pipe(Effect.provide(jobCreation(memoryRepositories))))
  }

  it.effect("takes a priority within the bounds", () =>
    Effect.gen(function*() {
      const { job } = yield* createWithPriority(100)
      expect(job.priority).toBe(100)
    }).pipe(Effect.provide(jobCreation(memoryRepositories))))
})
