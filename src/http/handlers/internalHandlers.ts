import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { AiJobLifecycleRepository } from "../../services/AiJobLifecycleRepository.js"
import { CredentialVault } from "../../services/CredentialVault.js"
import { AiJobApi } from "../Api.js"
import { CredentialNotFoundError } from "../ApiErrors.js"
import { fromCredentialError, fromPersistence } from "../errorMapping.js"

const notFound = () => new CredentialNotFoundError({ message: "No active credential for this job." })

/**
 * Runtime resolve (docs/architecture.md §14.1): an external runtime that runs a job asks for the
 * key that pays for it: only for a queued or running job that names this credential, while the
 * credential is its owner's and not revoked. The key never reaches a log.
 */
export const InternalHandlersLive = HttpApiBuilder.group(AiJobApi, "internal", (handlers) =>
  Effect.gen(function*() {
    const vault = yield* CredentialVault
    const lifecycle = yield* AiJobLifecycleRepository
    return handlers.handle("resolveCredential", ({ path, payload }) =>
      Effect.gen(function*() {
        const job = yield* lifecycle.findById(payload.jobId)
        if (
          Option.isNone(job) ||
          job.value.credentialId !== path.credentialId ||
          job.value.credentialMode !== "user_deepseek_key" ||
          (job.value.lifecycleStatus !== "queued" && job.value.lifecycleStatus !== "running")
        ) {
          // Ids are logged once they name a stored job; anything else is text a caller sent.
          yield* Effect.logInfo("runtime credential resolve refused").pipe(
            Effect.annotateLogs(
              Option.match(job, {
                onNone: () => ({ jobFound: false }),
                onSome: (found) => ({ jobId: found.id, credentialMatches: found.credentialId === path.credentialId })
              })
            )
          )
          return yield* Effect.fail(notFound())
        }
        const resolved = yield* vault.resolve({
          mode: "user_deepseek_key",
          credentialId: path.credentialId,
          userId: job.value.userId
        })
        yield* Effect.logInfo("runtime credential resolved").pipe(
          Effect.annotateLogs({ credentialId: path.credentialId, jobId: payload.jobId })
        )
        return { credentialId: path.credentialId, provider: resolved.provider, apiKey: resolved.apiKey }
      }).pipe(
        Effect.catchTags({
          CredentialError: (error) =>
            error.code === "CREDENTIAL_NOT_FOUND" ? Effect.fail(notFound()) : fromCredentialError(error),
          PersistenceError: fromPersistence
        })
      ))
  }))
