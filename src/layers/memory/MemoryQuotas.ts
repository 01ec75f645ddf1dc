import { Effect, Layer } from "effect"
import { QuotaExceeded, TooManyJobs } from "../../domain/QuotaErrors.js"
import { AiJobLifecycleRepository } from "../../services/AiJobLifecycleRepository.js"
import { QuotaLimitsConfig, Quotas } from "../../services/Quotas.js"
import { MemoryDatabase } from "./MemoryDatabase.js"

const dayMillis = 24 * 60 * 60 * 1000

/** In memory the create transaction is already serialized; counting inside it is enough. */
export const MemoryQuotas = Layer.effect(
  Quotas,
  Effect.gen(function* () {
    const db = yield* MemoryDatabase
    const jobs = yield* AiJobLifecycleRepository
    const limits = yield* QuotaLimitsConfig
    const admit = (userId: string) =>
      Effect.gen(function* () {
        const now = yield* db.now
        const startOfDay = new Date(Math.floor(now.getTime() / dayMillis) * dayMillis)
        if ((yield* jobs.countActive(userId)) >= limits.maxActiveJobsPerUser) {
          return yield* Effect.fail(new TooManyJobs({ userId, limit: limits.maxActiveJobsPerUser }))
        }
        if ((yield* jobs.countCreatedSince(userId, startOfDay)) >= limits.dailyJobQuota) {
          return yield* Effect.fail(new QuotaExceeded({ userId, limit: limits.dailyJobQuota }))
        }
      })
    return Quotas.of({ admit })
  })
)
