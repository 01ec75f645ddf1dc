import { Effect, Option } from "effect"
import { InternalError } from "../domain/ExecutionError.js"
import { CredentialVault } from "../services/CredentialVault.js"
import { ModelRouter } from "../services/ModelRouter.js"
import { SnapshotRepository } from "../services/SnapshotRepository.js"
import { persistenceAsInternal } from "./internalErrors.js"
import type { PreparedJob, ResolvedJob } from "./RunningJob.js"
import { stageDuration, timed } from "../services/EngineMetrics.js"

/**
 * RESOLVE (docs/architecture.md §8.2): the snapshot the job runs on, the key that pays for it,
 * and the model that serves it. The prompt is rendered per call in EXECUTE, since a retry may
 * add problems.
 */
export const resolve = Effect.fn("pipeline.resolve", { captureStackTrace: false })(
  function* (prepared: PreparedJob) {
    const snapshots = yield* SnapshotRepository
    const vault = yield* CredentialVault
    const router = yield* ModelRouter
    const { job } = prepared

    const snapshot = prepared.snapshot ??
      (yield* snapshots.findByJobId(job.id).pipe(Effect.catchTag("PersistenceError", persistenceAsInternal)))
    if (Option.isNone(snapshot)) {
      return yield* Effect.fail(
        new InternalError({ code: "INTERNAL_ERROR", message: `job ${job.id} has no input snapshot (expired or never written)` })
      )
    }
    const credential = yield* vault.resolve({ mode: job.credentialMode, credentialId: job.credentialId, userId: job.userId })
      .pipe(Effect.catchTag("PersistenceError", persistenceAsInternal))
    const route = yield* router.route({ jobType: job.jobType, credentialMode: job.credentialMode })
    return { ...prepared, content: snapshot.value.content, credential, route } satisfies ResolvedJob
  },
  Effect.annotateLogs({ stage: "RESOLVE" }),
  timed(stageDuration, { stage: "resolve" })
)
