import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Clock, Duration, Effect, Layer, Stream } from "effect"
import { createHash } from "node:crypto"
import { userKeyProvider } from "../../domain/CredentialMode.js"
import { isTerminal } from "../../domain/LifecycleStatus.js"
import { AiJobLifecycleRepository } from "../../services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../services/AiJobService.js"
import { CancelSignal } from "../../services/CancelSignal.js"
import { recordFinished } from "../../services/EngineMetrics.js"
import { JobDefinitionRegistry } from "../../services/JobDefinitionRegistry.js"
import { jobEventOf, JobEvents } from "../../services/JobEvents.js"
import { ResultProjectors } from "../../services/ResultProjectors.js"
import { AiJobApi } from "../Api.js"
import { jobNotFound } from "../ApiErrors.js"
import { JobBatchResponse, JobStatusResponse, maxWaitMs } from "../ApiSchemas.js"
import { CurrentUser } from "../Auth.js"
import {
  fromIdempotencyKeyReused,
  fromInvalidJobInput,
  fromJobAlreadyCancelled,
  fromJobNotCancellable,
  fromPersistence,
  fromQuotaExceeded,
  fromTooManyJobs,
  fromUnknownJobType
} from "../errorMapping.js"
import { awaitTerminal, jobStatusFrames, stateIdOf } from "../jobEventStream.js"
import { fromTooManyLiveStreams, LiveStreamLimits } from "../LiveStreamLimits.js"
import { PlatformGate } from "../PlatformGate.js"
import { acceptedJobAnswer, acceptedJobBatchAnswer, jobStatusAnswer, jobStatusResponse } from "../presenters.js"
import { withoutRequestBody } from "../requestBody.js"
import { makeJobViews } from "./jobViews.js"

const encodeExisting = HttpServerResponse.schemaJson(JobStatusResponse)
const encodeExistingBatch = HttpServerResponse.schemaJson(JobBatchResponse)

const conceptTarget = (concept: string) =>
  createHash("sha256").update(concept.trim().toLowerCase(), "utf8").digest("hex")

/** What each job type's job is about, the same for a single create and a batch's items. */
const flashcardTarget = (payload: { readonly deckId?: string | undefined }) => ({
  targetType: "flashcard_deck",
  targetId: payload.deckId ?? "unassigned"
})
const feynmanTarget = (payload: { readonly concept: string }) => ({
  targetType: "learning_concept",
  targetId: conceptTarget(payload.concept)
})
// An analysis is about the learner, whichever evaluations it reads.
const analysisTarget = (userId: string) => ({ targetType: "learner", targetId: userId })

/** The creation errors both endpoints answer, as public errors. */
const creationErrors = {
  UnknownJobType: fromUnknownJobType,
  InvalidJobInput: fromInvalidJobInput,
  IdempotencyKeyReused: fromIdempotencyKeyReused,
  TooManyJobs: fromTooManyJobs,
  QuotaExceeded: fromQuotaExceeded,
  PersistenceError: fromPersistence
} as const

export const JobsHandlersLive = HttpApiBuilder.group(AiJobApi, "jobs", (handlers) =>
  Effect.gen(function*() {
    const service = yield* AiJobService
    const lifecycle = yield* AiJobLifecycleRepository
    const registry = yield* JobDefinitionRegistry
    const projectors = yield* ResultProjectors
    const cancelSignal = yield* CancelSignal
    const jobEvents = yield* JobEvents
    const gate = yield* PlatformGate
    const views = yield* makeJobViews
    const liveStreams = yield* LiveStreamLimits

    const statusOf = (job: Parameters<typeof jobStatusResponse>[0]) =>
      Effect.map(views.artifactsOf(job), (artifacts) => jobStatusResponse(job, artifacts))

    const currentStatus = (jobId: string) => Effect.flatMap(views.find(jobId), statusOf)

    const create = (request: {
      readonly jobType: string
      readonly targetType: string
      readonly targetId: string
      readonly input: unknown
      readonly idempotencyKey: string | undefined
    }) =>
      Effect.gen(function*() {
        const user = yield* CurrentUser
        yield* gate.ensureOpen
        const { job, created } = yield* service.createJob({
          userId: user.userId,
          jobType: request.jobType,
          targetType: request.targetType,
          targetId: request.targetId,
          idempotencyKey: request.idempotencyKey,
          input: request.input,
          storedKeyOf: userKeyProvider
        })
        yield* Effect.logInfo(created ? "job accepted" : "job returned for its idempotency key").pipe(
          Effect.annotateLogs({ jobId: job.id, jobType: job.jobType, userId: user.userId })
        )
        if (created) return acceptedJobAnswer(job)
        // Both answers have the same fields, so the encoder cannot tell them apart by value:
        // the 200 of an idempotent repeat is written out here.
        return yield* statusOf(job).pipe(
          Effect.flatMap((status) => encodeExisting(status, { status: 200 })),
          Effect.orDie
        )
      }).pipe(Effect.catchTags(creationErrors))

    const createBatch = (request: {
      readonly jobType: string
      readonly items: ReadonlyArray<{ readonly targetType: string; readonly targetId: string; readonly input: unknown }>
      readonly idempotencyKey: string | undefined
    }) =>
      Effect.gen(function*() {
        const user = yield* CurrentUser
        yield* gate.ensureOpen
        const { created, jobs } = yield* service.createJobBatch({
          userId: user.userId,
          jobType: request.jobType,
          items: request.items,
          idempotencyKey: request.idempotencyKey,
          storedKeyOf: userKeyProvider
        })
        yield* Effect.logInfo(created ? "job batch accepted" : "job batch returned for its idempotency key").pipe(
          Effect.annotateLogs({ jobType: request.jobType, jobs: jobs.length, userId: user.userId })
        )
        if (created) return acceptedJobBatchAnswer(jobs)
        // As for a single create, the 200 of an idempotent repeat is written out here.
        return yield* Effect.forEach(jobs, statusOf).pipe(
          Effect.flatMap((statuses) => encodeExistingBatch(new JobBatchResponse({ jobs: statuses }), { status: 200 })),
          Effect.orDie
        )
      }).pipe(Effect.catchTags(creationErrors))

    return handlers
      .handle(
        "createFlashcardGeneration",
        ({ headers, payload }) =>
          create({
            jobType: "flashcard_generation",
            ...flashcardTarget(payload),
            input: payload,
            idempotencyKey: headers["idempotency-key"]
          }),
        { uninterruptible: true }
      )
      .handle(
        "createFeynmanEvaluation",
        ({ headers, payload }) =>
          create({
            jobType: "feynman_evaluation",
            ...feynmanTarget(payload),
            input: payload,
            idempotencyKey: headers["idempotency-key"]
          }),
        { uninterruptible: true }
      )
      .handle(
        "createLearningAnalysis",
        ({ headers, payload }) =>
          Effect.flatMap(CurrentUser, (user) =>
            create({
              jobType: "learning_analysis",
              ...analysisTarget(user.userId),
              input: payload,
              idempotencyKey: headers["idempotency-key"]
            })),
        { uninterruptible: true }
      )
      .handle(
        "createFlashcardGenerationBatch",
        ({ headers, payload }) =>
          createBatch({
            jobType: "flashcard_generation",
            items: payload.items.map((item) => ({ ...flashcardTarget(item), input: item })),
            idempotencyKey: headers["idempotency-key"]
          }),
        { uninterruptible: true }
      )
      .handle(
        "createFeynmanEvaluationBatch",
        ({ headers, payload }) =>
          createBatch({
            jobType: "feynman_evaluation",
            items: payload.items.map((item) => ({ ...feynmanTarget(item), input: item })),
            idempotencyKey: headers["idempotency-key"]
          }),
        { uninterruptible: true }
      )
      .handle(
        "createLearningAnalysisBatch",
        ({ headers, payload }) =>
          Effect.flatMap(CurrentUser, (user) =>
            createBatch({
              jobType: "learning_analysis",
              items: payload.items.map((item) => ({ ...analysisTarget(user.userId), input: item })),
              idempotencyKey: headers["idempotency-key"]
            })),
        { uninterruptible: true }
      )
      .handle("listJobs", ({ urlParams }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          return yield* views.page(
            { userId: user.userId, statuses: urlParams.status === undefined ? undefined : [urlParams.status] },
            urlParams,
            statusOf
          )
        }))
      .handle("getJob", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          if (urlParams.waitFor !== "terminal") {
            const { artifacts, job } = yield* views.findVisibleWithArtifacts(path.jobId, user, { admins: true })
            return jobStatusAnswer(job, artifacts)
          }
          const job = yield* views.findVisible(path.jobId, user, { admins: true })
          if (isTerminal(job.lifecycleStatus)) return yield* statusOf(job)
          yield* liveStreams.reserve(user.userId)
          // The wait ends at the timeout asked for, or when the token expires if that is sooner.
          const untilExpiry = user.expiresAtMillis - (yield* Clock.currentTimeMillis)
          return yield* awaitTerminal({
            subscribe: jobEvents.subscribe(job.id),
            read: currentStatus(job.id),
            timeout: Duration.millis(Math.max(0, Math.min(urlParams.timeoutMs ?? maxWaitMs, maxWaitMs, untilExpiry)))
          })
        }).pipe(Effect.catchTag("TooManyLiveStreams", fromTooManyLiveStreams)))
      .handle("jobEvents", ({ headers, path }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          const job = yield* views.findVisible(path.jobId, user, { admins: true })
          const lastEventId = headers["last-event-id"]
          // The client already saw the end: 204 tells an EventSource to stop reconnecting.
          if (isTerminal(job.lifecycleStatus) && lastEventId !== undefined) {
            if (stateIdOf(yield* statusOf(job)) === lastEventId) return HttpServerResponse.empty({ status: 204 })
          }
          // The slot is the request's: it is given back when the response ends, however it ends.
          yield* liveStreams.reserve(user.userId)
          const end = yield* liveStreams.streamEnd(user.expiresAtMillis)
          const frames = Stream.unwrapScoped(
            Effect.map(
              jobEvents.subscribe(job.id),
              (changes) => jobStatusFrames({ changes, read: currentStatus(job.id), lastEventId, end })
            )
          )
          return HttpServerResponse.stream(Stream.encodeText(frames), {
            contentType: "text/event-stream",
            headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
          })
        }).pipe(Effect.catchTag("TooManyLiveStreams", fromTooManyLiveStreams)))
      .handle("getJobArtifacts", ({ path }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          const job = yield* views.findVisible(path.jobId, user, { admins: true })
          const artifacts = yield* views.artifactsOf(job)
          const records = job.lifecycleStatus === "succeeded"
            ? yield* Effect.gen(function*() {
              const registered = yield* registry.get(job.jobType)
              const key = registered.definition.projector
              if (key === undefined) return []
              const projector = yield* projectors.get(key)
              return yield* projector.records(job)
            }).pipe(
              Effect.catchTags({
                UnknownJobType: fromUnknownJobType,
                UnknownProjectorKey: (error) =>
                  Effect.logError("projector is not registered in this process").pipe(
                    Effect.annotateLogs({ projector: error.key }),
                    Effect.zipRight(fromUnknownJobType({ jobType: job.jobType }))
                  ),
                PersistenceError: fromPersistence
              })
            )
            : []
          return {
            jobId: job.id,
            jobType: job.jobType,
            lifecycleStatus: job.lifecycleStatus,
            artifacts: artifacts.map((a) => ({
              artifactType: a.artifactType,
              artifactId: a.artifactId,
              ordinal: a.ordinal
            })),
            records
          }
        }))
      .handle(
        "cancelJob",
        ({ path }) =>
          withoutRequestBody(Effect.gen(function*() {
            const user = yield* CurrentUser
            const job = yield* views.findVisible(path.jobId, user, { admins: false })
            const after = yield* lifecycle.requestCancel(job.id).pipe(
              Effect.catchTags({
                JobNotFound: () => Effect.fail(jobNotFound()),
                JobNotCancellable: fromJobNotCancellable,
                JobAlreadyCancelled: fromJobAlreadyCancelled,
                PersistenceError: fromPersistence
              })
            )
            // A running job only records the request: tell its worker now.
            if (after.lifecycleStatus === "running") yield* cancelSignal.publish(after.id)
            else yield* jobEvents.publish(jobEventOf(after))
            // A queued job is cancelled here and now: this is where it finishes.
            if (after.lifecycleStatus === "cancelled" && job.lifecycleStatus === "queued") yield* recordFinished(after)
            yield* Effect.logInfo("job cancel requested").pipe(
              Effect.annotateLogs({ jobId: after.id, userId: user.userId, lifecycleStatus: after.lifecycleStatus })
            )
            return yield* statusOf(after)
          })),
        { uninterruptible: true }
      )
  })).pipe(Layer.provide(LiveStreamLimits.Default))
