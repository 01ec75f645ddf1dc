import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { userKeyProvider } from "../../domain/CredentialMode.js"
import { CredentialVault } from "../../services/CredentialVault.js"
import { AiJobApi } from "../Api.js"
import { CredentialNotFoundError } from "../ApiErrors.js"
import { CurrentUser } from "../Auth.js"
import { fromCredentialError, fromPersistence, fromStoreCredentialError } from "../errorMapping.js"
import { withoutRequestBody } from "../requestBody.js"

const provider = userKeyProvider

/** The caller's own DeepSeek key: stored encrypted, never returned, revocable. */
export const CredentialsHandlersLive = HttpApiBuilder.group(
  AiJobApi,
  "credentials",
  (handlers) =>
    Effect.gen(function*() {
      const vault = yield* CredentialVault
      return handlers
        .handle(
          "storeDeepseekKey",
          ({ payload }) =>
            Effect.gen(function*() {
              const user = yield* CurrentUser
              const stored = yield* vault.store({ userId: user.userId, apiKey: payload.apiKey, provider })
              return {
                credentialId: stored.id,
                provider: stored.provider,
                keyVersion: stored.keyVersion,
                createdAt: stored.createdAt.toISOString()
              }
            }).pipe(Effect.catchTags({ CredentialError: fromStoreCredentialError, PersistenceError: fromPersistence })),
          { uninterruptible: true }
        )
        .handle(
          "revokeDeepseekKey",
          () =>
            withoutRequestBody(Effect.gen(function*() {
              const user = yield* CurrentUser
              const active = yield* vault.activeCredentialId(user.userId, provider)
              if (Option.isNone(active)) {
                return yield* Effect.fail(new CredentialNotFoundError({ message: "No active DeepSeek key is stored." }))
              }
              yield* vault.revoke({ userId: user.userId, credentialId: active.value })
            })).pipe(Effect.catchTags({ CredentialError: fromCredentialError, PersistenceError: fromPersistence })),
          { uninterruptible: true }
        )
    })
)
