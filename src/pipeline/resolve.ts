import { Array as Arr, Effect, Option } from "effect"
import { CredentialError, InternalError } from "../domain/ExecutionError.js"
import { CredentialVault } from "../services/CredentialVault.js"
import { stageDuration, timed } from "../services/EngineMetrics.js"
import { ModelRouter, targetsOf } from "../services/ModelRouter.js"
import { persistenceAsInternal } from "./internalErrors.js"
import type { PreparedJob, ResolvedJob } from "./RunningJob.js"
import { stageSpan } from "./stageSpan.js"

/**
 * RESOLVE (docs/architecture.md §8.2): the snapshot the job runs on, the keys that pay for it,
 * and the targets (provider and model) that may serve it, each with its own provider's key. The
 * prompt is rendered per call in EXECUTE, since a retry may add problems.
 */
export const resolve = Effect.fnUntraced(
  function*(prepared: PreparedJob) {
    const vault = yield* CredentialVault
    const router = yield* ModelRouter
    const { job } = prepared

    const snapshot = prepared.snapshot
    if (Option.isNone(snapshot)) {
      return yield* Effect.fail(
        new InternalError({
          code: "INTERNAL_ERROR",
          message: `job ${job.id} has no input snapshot (expired or never written)`
        })
      )
    }
    const credentials = yield* vault.resolve({
      mode: job.credentialMode,
      credentialId: job.credentialId,
      userId: job.userId
    })
      .pipe(Effect.catchTag("PersistenceError", persistenceAsInternal))
    const route = yield* router.route({ jobType: job.jobType, credentialMode: job.credentialMode })
    // Each target gets its own provider's key; a target whose provider this job has no key for is left out.
    const targets = Arr.filterMap(
      targetsOf(route),
      (target) => Option.map(credentials.forProvider(target.provider), (credential) => ({ ...target, credential }))
    )
    if (!Arr.isNonEmptyReadonlyArray(targets)) {
      return yield* new CredentialError(
        credentials.mode === "platform_key"
          ? { code: "CREDENTIAL_MISSING", message: `no provider of the route of ${job.jobType} has a platform key` }
          : {
            code: "CREDENTIAL_NOT_FOUND",
            message:
              `the route of ${job.jobType} has no target at ${credentials.provider}, the only provider the user's key is for`
          }
      )
    }
    return {
      ...prepared,
      content: snapshot.value.content,
      credential: targets[0].credential,
      route,
      targets
    } satisfies ResolvedJob
  },
  Effect.annotateLogs({ stage: "RESOLVE" }),
  timed(stageDuration, { stage: "resolve" }),
  stageSpan("pipeline.resolve")
)
