import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, type Layer } from "effect"
import { newId } from "../../src/domain/Ids.js"
import { AiJobLifecycleRepository } from "../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../src/services/AiJobService.js"

/** Run with `MAX_ACTIVE_JOBS_PER_USER = 5` and `DAILY_JOB_QUOTA = 8`. */
export const quotasContract = (
  name: string,
  stack: Layer.Layer<AiJobService | AiJobLifecycleRepository, unknown>,
  options: { readonly liveClock: boolean }
) =>
  describe(`Quotas contract (${name})`, () => {
    layer(stack, { timeout: 60_000, excludeTestServices: options.liveClock })((it) => {
      const create = (userId: string, i: number) =>
        Effect.flatMap(AiJobService, (service) =>
          service.createJob({
            userId,
            jobType: "synthetic_echo",
            targetType: "test",
            targetId: `${i}`,
            input: { message: "x" }
          }))

      it.effect("20 parallel creates with a limit of 5 active jobs accept exactly 5", () =>
        Effect.gen(function* () {
          const userId = `quota-${yield* newId}`
          const results = yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => i), (i) => Effect.either(create(userId, i)), {
            concurrency: "unbounded"
          })
          expect(results.filter(Either.isRight)).toHaveLength(5)
          expect(new Set(results.filter(Either.isLeft).map((result) => result.left._tag))).toStrictEqual(new Set(["TooManyJobs"]))
          const repo = yield* AiJobLifecycleRepository
          expect(yield* repo.countActive(userId)).toBe(5)
          // Another user is not affected.
          expect(Either.isRight(yield* Effect.either(create(`other-${yield* newId}`, 0)))).toBe(true)
        }))

      it.effect("a user admitted before: 20 parallel creates with a limit of 5 active jobs accept exactly the 4 left", () =>
        Effect.gen(function* () {
          const userId = `quota-again-${yield* newId}`
          yield* create(userId, 0)
          const results = yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => i + 1), (i) => Effect.either(create(userId, i)), {
            concurrency: "unbounded"
          })
          expect(results.filter(Either.isRight)).toHaveLength(4)
          expect(new Set(results.filter(Either.isLeft).map((result) => result.left._tag))).toStrictEqual(new Set(["TooManyJobs"]))
          const repo = yield* AiJobLifecycleRepository
          expect(yield* repo.countActive(userId)).toBe(5)
        }))

      it.effect("the daily quota counts finished jobs too", () =>
        Effect.gen(function* () {
          const repo = yield* AiJobLifecycleRepository
          const userId = `daily-${yield* newId}`
          for (let i = 0; i < 8; i++) {
            const { job } = yield* create(userId, i)
            yield* repo.requestCancel(job.id)
          }
          const ninth = yield* Effect.either(create(userId, 9))
          expect(Either.isLeft(ninth) && ninth.left._tag).toBe("QuotaExceeded")
          expect(yield* repo.list({ userId }, { limit: 100 })).toHaveLength(8)
        }))

      it.effect("an operator's retry is not held to the user's limits", () =>
        Effect.gen(function* () {
          const service = yield* AiJobService
          const userId = `bypass-${yield* newId}`
          for (let i = 0; i < 5; i++) yield* create(userId, i)
          const retried = yield* service.createJob({
            userId,
            jobType: "synthetic_echo",
            targetType: "test",
            targetId: "retry",
            input: { message: "x" },
            enforceQuotas: false
          })
          expect(retried.created).toBe(true)
        }))
    })
  })
