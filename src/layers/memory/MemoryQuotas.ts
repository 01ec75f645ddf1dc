import { Effect, Layer, Option } from "effect"
import { QuotaLimitsConfig } from "../../config/QuotaLimitsConfig.js"
import { AiJobLifecycleRepository } from "../../services/AiJobLifecycleRepository.js"
import { CredentialRepository } from "../../services/CredentialRepository.js"
import { admission, Quotas } from "../../services/Quotas.js"
import { MemoryDatabase } from "./MemoryDatabase.js"

const dayMillis = 24 * 60 * 60 * 1000

/** In memory the create transaction is already serialized; counting inside it is enough. */
export const MemoryQuotas = Layer.effect(
  Quotas,
  Effect.gen(function*() {
    const db = yield* MemoryDatabase
    const jobs = yield* AiJobLifecycleRepository
    const credentials = yield* CredentialRepository
    const limits = yield* QuotaLimitsConfig
    const admit: Quotas["Type"]["admit"] = (userId, options) =>
      Effect.gen(function*() {
        const now = yield* db.now
        const startOfDay = new Date(Math.floor(now.getTime() / dayMillis) * dayMillis)
        const active = yield* jobs.countActive(userId)
        const today = yield* jobs.countCreatedSince(userId, startOfDay)
        yield* admission(userId, limits, { active, today }, options?.jobs)
        const provider = options?.activeCredentialOf
        const credential = provider === undefined ? Option.none() : yield* credentials.findActive(userId, provider)
        return { activeCredentialId: Option.map(credential, (record) => record.id) }
      })
    return Quotas.of({ admit })
  })
)
