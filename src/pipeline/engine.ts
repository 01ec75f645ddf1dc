import {
  Context,
  Deferred,
  Effect,
  Exit,
  Fiber,
  Metric,
  Option,
  PubSub,
  Ref,
  type Schedule,
  Stream,
  type Tracer
} from "effect"
import { TimingConfig } from "../config/EngineConfig.js"
import { ProviderSettings } from "../config/ProviderSettings.js"
import type { AiJob } from "../domain/AiJob.js"
import type { ExecutionError } from "../domain/ExecutionError.js"
import { progressAt } from "../domain/JobEvent.js"
import type { CancelRequestedBeforeSuccess, LockLost } from "../domain/LifecycleErrors.js"
import type { PersistenceError } from "../domain/PersistenceError.js"
import { storedPlacement } from "../domain/TraceContext.js"
import { AiCostCalculator } from "../services/AiCostCalculator.js"
import { AiGateway } from "../services/AiGateway.js"
import { AiJobLifecycleRepository } from "../services/AiJobLifecycleRepository.js"
import { ArtifactRepository } from "../services/ArtifactRepository.js"
import { CancelSignal } from "../services/CancelSignal.js"
import { ContentSafety } from "../services/ContentSafety.js"
import { CredentialVault } from "../services/CredentialVault.js"
import { activeJobs } from "../services/EngineMetrics.js"
import { JobDefinitionRegistry } from "../services/JobDefinitionRegistry.js"
import { JobEvents } from "../services/JobEvents.js"
import { JobProgress } from "../services/JobProgress.js"
import { type JobDelivery, JobHandedOff } from "../services/JobQueue.js"
import { ModelRouter } from "../services/ModelRouter.js"
import { PromptTemplates } from "../services/PromptTemplates.js"
import { ProviderCapacity } from "../services/ProviderCapacity.js"
import { ProviderCircuitBreaker } from "../services/ProviderCircuitBreaker.js"
import { ResultProjectors } from "../services/ResultProjectors.js"
import { SnapshotRepository } from "../services/SnapshotRepository.js"
import { UnitOfWork } from "../services/UnitOfWork.js"
import { UsageLog } from "../services/UsageLog.js"
import { complete } from "./complete.js"
import { execute } from "./execute.js"
import { type Commit, makeGroupCommit } from "./groupCommit.js"
import { defectsAsInternal } from "./internalErrors.js"
import { executeProgressRange, type LeaseHold, makeLeaseKeeper } from "./LeaseKeeper.js"
import { makeGroupLock, prepare } from "./prepare.js"
import { project } from "./project.js"
import { resolve } from "./resolve.js"
import { loggedRetries, retrySchedule } from "./retrySchedule.js"
import { type ExecutedJob, type PreparedJob, type ResolvedJob, RunOutcome } from "./RunningJob.js"
import { recordUsage } from "./usage.js"

/** Every service the pipeline's stages use: a run's fiber sees these and nothing else. */
const engineServiceTags = [
  AiJobLifecycleRepository,
  JobDefinitionRegistry,
  SnapshotRepository,
  CredentialVault,
  ModelRouter,
  PromptTemplates,
  ContentSafety,
  AiGateway,
  ProviderCapacity,
  ProviderCircuitBreaker,
  ProviderSettings,
  AiCostCalculator,
  UsageLog,
  ResultProjectors,
  ArtifactRepository,
  UnitOfWork,
  JobEvents,
  CancelSignal,
  TimingConfig
] as const

export type EngineServices = Context.Tag.Identifier<(typeof engineServiceTags)[number]>

/** The queue taking the delivery back (its AbortSignal) hands the run off, while the scope is open. */
const handOffOnAbort = (signal: AbortSignal, outcome: Deferred.Deferred<RunOutcome>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const onAbort = () => Deferred.unsafeDone(outcome, Exit.succeed(RunOutcome.HandedOff()))
      if (signal.aborted) onAbort()
      else signal.addEventListener("abort", onAbort, { once: true })
      return onAbort
    }),
    (onAbort) => Effect.sync(() => signal.removeEventListener("abort", onAbort))
  )

/** What a job type reports during EXECUTE, held within the call's range (see `JobProgress`). */
const executeProgress = (hold: LeaseHold): JobProgress["Type"] => ({
  report: (percent) =>
    Number.isFinite(percent)
      ? hold.reach(Math.min(executeProgressRange.max, Math.max(executeProgressRange.min, Math.round(percent))))
      : Effect.void
})

/**
 * How stages that failed end the run: a lost lease and a cancel requested before the success
 * stop it from outside; anything else failed the job, after `calls` provider calls.
 */
const outcomeOfFailure = (
  error: ExecutionError | LockLost | CancelRequestedBeforeSuccess,
  calls: number
): RunOutcome =>
  error._tag === "LockLost"
    ? RunOutcome.LockLost()
    : error._tag === "CancelRequestedBeforeSuccess"
    ? RunOutcome.CancelRequested()
    : RunOutcome.Failed({ error, calls })

/** One EXECUTE call, which the run retries per the definition. */
const executeOnce = Effect.fnUntraced(function*(
  resolved: ResolvedJob,
  progress: JobProgress["Type"],
  calls: Ref.Ref<number>,
  problems: Ref.Ref<ReadonlyArray<string>>
) {
  // A call is numbered by its lease and its place in the lease: no read of the usage
  // log, and a zombie (an older lease) can never take its successor's number.
  const nextCallNo = Effect.map(Ref.getAndUpdate(calls, (n) => n + 1), (n) => n + 1)
  const attemptNo = yield* nextCallNo
  return yield* execute(resolved, attemptNo, yield* Ref.get(problems), nextCallNo).pipe(
    Effect.provideService(JobProgress, progress),
    defectsAsInternal,
    // VALIDATION is retried with what was wrong added to the prompt.
    Effect.tapError((
      error
    ) => (error._tag === "ValidationError" ? Ref.set(problems, error.problems) : Effect.void))
  )
})

/**
 * EXECUTE's calls until one is validated, then PROJECT. A validated answer goes on to PROJECT
 * whatever stops the run meanwhile, so its call's usage row is never lost between the two. Once
 * projection starts it finishes: the job ends succeeded with its artifacts, or untouched (a
 * failed transaction, or a cancel requested before markSucceeded); never a mix. `committed` is
 * set in the same uninterruptible step as PROJECT's commit.
 */
const executeThenProject = <E, R>(
  prepared: PreparedJob,
  attempt: Effect.Effect<ExecutedJob, E, R>,
  schedule: Schedule.Schedule<unknown, unknown>,
  hold: LeaseHold,
  commit: Commit,
  committed: Ref.Ref<Option.Option<AiJob>>
) =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const executed = yield* restore(Effect.retry(attempt, loggedRetries(schedule, prepared.job.jobType)))
      yield* hold.reach(progressAt.VALIDATED)
      return yield* project(executed, commit).pipe(
        defectsAsInternal,
        Effect.retry(schedule),
        // The projection rolled back for good: its call's usage row is written on its own.
        Effect.tapError(() => recordUsage(executed.usage)),
        Effect.tap((job) => Ref.set(committed, Option.some(job)))
      )
    })
  )

/**
 * RESOLVE → EXECUTE (retried per the definition) → PROJECT: how the work ends by itself. The
 * keeper's next beat carries the progress each stage reaches (no write of its own: every write
 * per job is a commit).
 */
const runStages: (
  prepared: PreparedJob,
  hold: LeaseHold,
  commit: Commit,
  committed: Ref.Ref<Option.Option<AiJob>>
) => Effect.Effect<RunOutcome, never, EngineServices> = Effect.fnUntraced(function*(prepared, hold, commit, committed) {
  const schedule = retrySchedule(prepared.registered.definition)
  const calls = yield* Ref.make(0)
  const problems = yield* Ref.make<ReadonlyArray<string>>([])

  const stages = Effect.gen(function*() {
    const resolved = yield* resolve(prepared).pipe(defectsAsInternal, Effect.retry(schedule))
    yield* hold.reach(progressAt.RESOLVE)
    const attempt = executeOnce(resolved, executeProgress(hold), calls, problems)
    yield* hold.reach(progressAt.EXECUTE)
    const succeeded = yield* executeThenProject(prepared, attempt, schedule, hold, commit, committed)
    return RunOutcome.Succeeded({ job: succeeded })
  })

  return yield* stages.pipe(
    Effect.catchAll((error) => Effect.map(Ref.get(calls), (callCount) => outcomeOfFailure(error, callCount)))
  )
})

/**
 * The ids of the jobs an engine runs, and a count of the changes to them that the worker
 * directory listens to: it hears of every lock and release at once, and a change costs no copy
 * of the set. A change is one publish to the listeners (a SubscriptionRef's update, with its
 * lock, cost about a hundred fiber steps a change, two changes a job).
 */
const trackRunningJobs = (changed: PubSub.PubSub<number>) => {
  const ids = new Set<string>()
  let version = 0
  const change = (apply: () => void) =>
    Effect.suspend(() => {
      apply()
      return PubSub.publish(changed, ++version)
    })
  return {
    ids,
    add: (jobId: string) => change(() => ids.add(jobId)),
    remove: (jobId: string) => change(() => ids.delete(jobId)),
    /** Sets the active-jobs gauge to the count now. */
    measure: Effect.suspend(() => Metric.set(activeJobs, ids.size)),
    // Subscribed before the count is read, so no change falls between the two (one may come twice).
    changes: Stream.unwrapScoped(
      Effect.map(
        PubSub.subscribe(changed),
        (later) => Stream.concat(Stream.sync(() => version), Stream.fromQueue(later))
      )
    )
  }
}

/**
 * The run's span continues the trace stored with the job (its create request's), carried by the
 * payload, so every stage of every run joins that one trace.
 */
const runSpanOptions = (delivery: JobDelivery, workerId: string): Tracer.SpanOptions => ({
  kind: "consumer",
  captureStackTrace: false,
  ...storedPlacement(delivery.payload.traceParent),
  attributes: {
    "ai_job.id": delivery.payload.jobId,
    "ai_job.type": delivery.payload.jobType,
    "ai_job.queue": delivery.queueName,
    workerId
  }
})

/**
 * The AiJobExecutionEngine of one worker (docs/architecture.md §8): PREPARE, then RESOLVE, EXECUTE
 * and PROJECT under a lease the `LeaseKeeper` holds, then COMPLETE. Every error is caught, so engine
 * retries never become queue retries: `run` fails only with `JobHandedOff`, for the queue to redeliver.
 */
export const makeExecutionEngine = (workerId: string) =>
  Effect.gen(function*() {
    // Only what the stages use (17 services, not the process's ~50): every span, provideService
    // and fiber join of a run copies or diffs its fiber's context, several hundred times a job.
    const context = Context.pick(...engineServiceTags)(yield* Effect.context<EngineServices>())
    const timing = yield* TimingConfig
    const gatewaySettles = Context.get(context, AiGateway).settle ?? Effect.void
    const keeper = yield* makeLeaseKeeper
    // Deliveries that arrive together are locked by one statement, and projections that finish
    // together commit in one transaction; a lone one goes at once (docs/architecture.md §8.1, §8.4).
    const lockQueued = yield* makeGroupLock(workerId, timing.jobLockTtl)
    const commit = yield* makeGroupCommit
    const running = trackRunningJobs(yield* PubSub.unbounded<number>())
    let stopping = false

    /**
     * The stages in a fiber of their own, interrupted once the outcome is decided (PROJECT, once
     * begun, finishes first). A committed PROJECT wins over whatever stopped the run meanwhile: a
     * beat just after that commit finds the row no longer `running` and calls the lease lost.
     */
    const runUnderLease = (prepared: PreparedJob, delivery: JobDelivery) =>
      Effect.scoped(
        Effect.gen(function*() {
          const hold = yield* keeper.hold(prepared.lease, {
            progress: prepared.job.progress,
            honourCancel: prepared.registered.definition.execution.cancellable
          })
          yield* handOffOnAbort(delivery.signal, hold.outcome)
          const committed = yield* Ref.make(Option.none<AiJob>())
          const worker = yield* Effect.fork(
            Effect.flatMap(
              runStages(prepared, hold, commit, committed),
              (ended) => Deferred.succeed(hold.outcome, ended)
            )
          )
          const decided = yield* Deferred.await(hold.outcome)
          // Stopped from outside (a cancel, a hand-off, a lost lease): an answer already received
          // is read first, so its call is recorded with what the provider billed.
          if (Option.isNone(yield* Fiber.poll(worker))) yield* gatewaySettles
          yield* Fiber.interrupt(worker)
          return Option.match(yield* Ref.get(committed), {
            onNone: () => decided,
            onSome: (job) => RunOutcome.Succeeded({ job })
          })
        })
      )

    /** A locked job to its end (at once if a cancel came first, else under its lease), which COMPLETE records. */
    const runLocked = Effect.fnUntraced(
      function*(prepared: PreparedJob, delivery: JobDelivery) {
        if (prepared.job.cancelRequestedAt !== null && prepared.registered.definition.execution.cancellable) {
          return yield* complete(prepared, RunOutcome.CancelRequested())
        }
        const outcome = yield* runUnderLease(prepared, delivery)
        yield* complete(prepared, outcome)
      },
      (effect, prepared) =>
        effect.pipe(
          Effect.onExit(() => running.remove(prepared.job.id)),
          Effect.annotateLogs("attempt", prepared.lease.attempt)
        )
    )

    // A storage failure before the lock gives the delivery back to the queue, which tries again
    // after its backoff; acknowledging it would strand a queued job (the simulator found that).
    const giveBack = (jobId: string) => (error: PersistenceError) =>
      Effect.zipRight(
        Effect.logWarning("PREPARE failed; the delivery goes back to the queue").pipe(
          Effect.annotateLogs({ operation: error.operation })
        ),
        Effect.fail(new JobHandedOff({ jobId, reason: "storage unavailable during PREPARE", consumerStopping: false }))
      )

    /** PREPARE, then the locked job's run, in the span of the delivery's run. */
    const prepareAndRun = Effect.fnUntraced(
      function*(delivery: JobDelivery) {
        const prepared = yield* prepare(delivery.payload, workerId, timing.jobLockTtl, lockQueued).pipe(
          Effect.catchAll(giveBack(delivery.payload.jobId))
        )
        if (Option.isNone(prepared)) return
        const { job, lease } = prepared.value
        yield* Effect.annotateCurrentSpan({ "ai_job.lease_no": lease.leaseNo, "ai_job.attempt": lease.attempt })
        yield* running.add(job.id)
        yield* running.measure
        yield* runLocked(prepared.value, delivery).pipe(Effect.ensuring(running.measure))
      },
      (effect, delivery) => Effect.withSpan(effect, "pipeline.run", runSpanOptions(delivery, workerId))
    )

    const run = (delivery: JobDelivery): Effect.Effect<void, JobHandedOff> =>
      Effect.gen(function*() {
        if (stopping) {
          return yield* Effect.fail(
            new JobHandedOff({ jobId: delivery.payload.jobId, reason: "worker stopping", consumerStopping: true })
          )
        }
        yield* prepareAndRun(delivery)
      }).pipe(
        Effect.catchAllDefect((defect) => Effect.logError("engine defect; the reaper covers the job", defect)),
        // Once per run: every stage's lines and every statement's warnings carry them.
        Effect.annotateLogs({ workerId, jobId: delivery.payload.jobId, jobType: delivery.payload.jobType }),
        // In place of the caller's context, not merged into it (see `context`).
        Effect.mapInputContext((_: Context.Context<never>) => context)
      )

    return {
      workerId,
      run,
      runningJobIds: Effect.sync((): ReadonlyArray<string> => Array.from(running.ids)),
      /** A value now, then one for every change to the running jobs. */
      runningChanges: running.changes,
      /** Stops every running job at once and gives it back (graceful shutdown). */
      handOffAll: Effect.suspend(() => {
        stopping = true
        return keeper.handOffAll
      })
    }
  })

export type ExecutionEngine = Effect.Effect.Success<ReturnType<typeof makeExecutionEngine>>
