import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, type Layer } from "effect"
import { newId } from "../../src/domain/Ids.js"
import { AiJobLifecycleRepository } from "../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../src/services/AiJobService.js"
import { CredentialRepository } from "../../src/services/CredentialRepository.js"

/** Run with `MAX_ACTIVE_JOBS_PER_USER = 5` and `DAILY_JOB_QUOTA = 8`. */
export const quotasContract = (
  name: string,
  stack: Layer.Layer<AiJobService | AiJobLifecycleRepository | CredentialRepository, unknown>,
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
        Effect.gen(function*() {
          const userId = `quota-${yield* newId}`
          const results = yield* Effect.forEach(
            Array.from({ length: 20 }, (_, i) => i),
            (i) => Effect.either(create(userId, i)),
            {
              concurrency: "unbounded"
            }
          )
          expect(results.filter(Either.isRight)).toHaveLength(5)
          expect(new Set(results.filter(Either.isLeft).map((result) => result.left._tag))).toStrictEqual(
            new Set(["TooManyJobs"])
          )
          const repo = yield* AiJobLifecycleRepository
          expect(yield* repo.countActive(userId)).toBe(5)
          // Another user is not affected.
          expect(Either.isRight(yield* Effect.either(create(`other-${yield* newId}`, 0)))).toBe(true)
        }))

      it.effect("parallel batches count whole: of 10 batches of 2 with a limit of 5 active jobs exactly 2 are accepted; a batch of 6 is refused whole", () =>
        Effect.gen(function*() {
          const userId = `quota-batch-${yield* newId}`
          const batch = (size: number, first: number) =>
            Effect.flatMap(AiJobService, (service) =>
              service.createJobBatch({
                userId,
                jobType: "synthetic_echo",
                items: Array.from(
                  { length: size },
                  (_, k) => ({ targetType: "test", targetId: `${first + k}`, input: { message: "x" } })
                )
              }))
          const repo = yield* AiJobLifecycleRepository
          const tooBig = yield* Effect.either(batch(6, 100))
          expect(Either.isLeft(tooBig) && tooBig.left._tag).toBe("TooManyJobs")
          expect(yield* repo.countActive(userId)).toBe(0)
          const results = yield* Effect.forEach(
            Array.from({ length: 10 }, (_, i) => i),
            (i) => Effect.either(batch(2, i * 2)),
            {
              concurrency: "unbounded"
            }
          )
          expect(results.filter(Either.isRight)).toHaveLength(2)
          expect(new Set(results.filter(Either.isLeft).map((result) => result.left._tag))).toStrictEqual(
            new Set(["TooManyJobs"])
          )
          expect(yield* repo.countActive(userId)).toBe(4)
        }))

      it.effect("a user admitted before: 20 parallel creates with a limit of 5 active jobs accept exactly the 4 left", () =>
        Effect.gen(function*() {
          const userId = `quota-again-${yield* newId}`
          yield* create(userId, 0)
          const results = yield* Effect.forEach(
            Array.from({ length: 20 }, (_, i) => i + 1),
            (i) => Effect.either(create(userId, i)),
            {
              concurrency: "unbounded"
            }
          )
          expect(results.filter(Either.isRight)).toHaveLength(4)
          expect(new Set(results.filter(Either.isLeft).map((result) => result.left._tag))).toStrictEqual(
            new Set(["TooManyJobs"])
          )
          const repo = yield* AiJobLifecycleRepository
          expect(yield* repo.countActive(userId)).toBe(5)
        }))

      it.effect("the daily quota counts finished jobs too", () =>
        Effect.gen(function*() {
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

      // The admission's read finds the key (MySQL: the gate row's read), on a user's first create and after.
      it.effect("a create asking for a stored key gets the user's active key for that provider, and only that", () =>
        Effect.gen(function*() {
          const service = yield* AiJobService
          const credentials = yield* CredentialRepository
          const repo = yield* AiJobLifecycleRepository
          const userId = `keyed-${yield* newId}`
          const store = (id: string, provider: string) =>
            credentials.insertReplacingActive({
              id,
              userId,
              provider,
              encryptedKey: "ZW5j",
              iv: "aXY=",
              authTag: "dGFn",
              keyVersion: 1,
              keyFingerprint: id
            })
          const createAsking = (i: number, extra: { readonly enforceQuotas?: boolean } = {}) =>
            service.createJob({
              userId,
              jobType: "synthetic_echo",
              targetType: "test",
              targetId: `key-${i}`,
              input: { message: "x" },
              storedKeyOf: "deepseek",
              ...extra
            }).pipe(
              // Cancelled at once, so six creates stay within the five active jobs allowed.
              Effect.tap(({ job }) => repo.requestCancel(job.id)),
              Effect.map(({ job }) => [job.credentialMode, job.credentialId])
            )

          expect(yield* createAsking(0)).toStrictEqual(["platform_key", null])
          const otherProvider = yield* newId
          yield* store(otherProvider, "openai")
          expect(yield* createAsking(1)).toStrictEqual(["platform_key", null])

          const first = yield* newId
          yield* store(first, "deepseek")
          expect(yield* createAsking(2)).toStrictEqual(["user_deepseek_key", first])
          const second = yield* newId
          yield* store(second, "deepseek")
          expect(yield* createAsking(3, { enforceQuotas: false })).toStrictEqual(["user_deepseek_key", second])

          expect(yield* credentials.revoke(second, userId)).toBe(true)
          expect(yield* createAsking(4)).toStrictEqual(["platform_key", null])
          // Not asked for, a stored key is not used.
          yield* store(yield* newId, "deepseek")
          const unasked = yield* create(userId, 5)
          expect([unasked.job.credentialMode, unasked.job.credentialId]).toStrictEqual(["platform_key", null])
        }))

      it.effect("a user who stored a key before any create gets it on the first create (the gate's insert path)", () =>
        Effect.gen(function*() {
          const service = yield* AiJobService
          const credentials = yield* CredentialRepository
          const userId = `keyed-first-${yield* newId}`
          const credentialId = yield* newId
          yield* credentials.insertReplacingActive({
            id: credentialId,
            userId,
            provider: "deepseek",
            encryptedKey: "ZW5j",
            iv: "aXY=",
            authTag: "dGFn",
            keyVersion: 1,
            keyFingerprint: credentialId
          })
          const { job } = yield* service.createJob({
            userId,
            jobType: "synthetic_echo",
            targetType: "test",
            targetId: "first",
            input: { message: "x" },
            storedKeyOf: "deepseek"
          })
          expect([job.credentialMode, job.credentialId]).toStrictEqual(["user_deepseek_key", credentialId])
        }))

      it.effect("an operator's retry is not held to the user's limits", () =>
        Effect.gen(function*() {
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
