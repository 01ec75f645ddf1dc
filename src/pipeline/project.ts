import { Duration, Effect, Schedule } from "effect"
import { TimingConfig } from "../config/EngineConfig.js"
import { InternalError } from "../domain/ExecutionError.js"
import { LockLost } from "../domain/LifecycleErrors.js"
import { PersistenceError } from "../domain/PersistenceError.js"
import { AiJobLifecycleRepository } from "../services/AiJobLifecycleRepository.js"
import { ArtifactRepository } from "../services/ArtifactRepository.js"
import { stageDuration, timed } from "../services/EngineMetrics.js"
import { ResultProjectors } from "../services/ResultProjectors.js"
import { UnitOfWork } from "../services/UnitOfWork.js"
import type { Commit } from "./groupCommit.js"
import { persistenceAsInternal } from "./internalErrors.js"
import type { ExecutedJob } from "./RunningJob.js"
import { stageSpan } from "./stageSpan.js"
import { recordUsageWithResult } from "./usage.js"

/**
 * PROJECT (docs/architecture.md §11.2): the business rows, artifacts, usage row and fenced
 * `markSucceeded` in one transaction (`commit`, possibly shared by the group commit), so a lost
 * lease or an earlier cancel rolls all of it back. A repeated projection writes nothing new.
 */
export const project = Effect.fnUntraced(
  function*(executed: ExecutedJob, commit?: Commit) {
    const projectors = yield* ResultProjectors
    const artifacts = yield* ArtifactRepository
    const jobs = yield* AiJobLifecycleRepository
    const unitOfWork = yield* UnitOfWork
    const { job } = executed
    const key = executed.registered.definition.projector ?? job.jobType
    const projector = yield* projectors.get(key).pipe(
      Effect.mapError(() => new InternalError({ code: "INTERNAL_ERROR", message: `no projector registered as ${key}` }))
    )
    const timing = yield* TimingConfig
    const projectAndSucceed = Effect.gen(function*() {
      const projection = yield* projector.project(job, executed.output)
      const recorded = yield* artifacts.record(job.id, projection.artifacts)
      if (projection.duplicate || (recorded.inserted === 0 && recorded.duplicates > 0)) {
        yield* Effect.logWarning("projection already applied; nothing new written")
      }
      // COMPLETE's usage row, written in this transaction so it commits with the result.
      yield* recordUsageWithResult(executed.usage)
      // A cancel committed before this write wins: it refuses, and everything above rolls back.
      // The success writes its `ai.job.succeeded` event here too, listing these artifacts.
      return yield* jobs.markSucceeded(executed.lease, executed.outputHash, {
        honourCancel: executed.registered.definition.execution.cancellable,
        locked: job,
        artifacts: [...projection.artifacts].sort((a, b) => a.ordinal - b.ordinal)
      })
    })
    return yield* (commit === undefined ? unitOfWork.transaction(projectAndSucceed) : commit(projectAndSucceed, job.id))
      .pipe(
        // A lock wait that timed out (rows held by a frozen former owner, until the server ends
        // its idle transaction) rolled back and can run again: retried within one lease; a lease
        // lost meanwhile fails the fence instead.
        Effect.retry({
          while: (error) => error instanceof PersistenceError && error.lockContention === true,
          schedule: Schedule.exponential(Duration.millis(100)).pipe(
            Schedule.union(Schedule.spaced(Duration.seconds(1))),
            Schedule.jittered,
            Schedule.upTo(timing.jobLockTtl)
          )
        }),
        Effect.catchTag("PersistenceError", persistenceAsInternal),
        // The fence found the job no longer ours: the lease ended.
        Effect.catchTags({
          IllegalTransition: () => Effect.fail(new LockLost({ ...executed.lease })),
          JobNotFound: () => Effect.fail(new LockLost({ ...executed.lease }))
        })
      )
  },
  Effect.annotateLogs({ stage: "PROJECT" }),
  timed(stageDuration, { stage: "project" }),
  stageSpan("pipeline.project")
)
