import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import type { Schema } from "effect"
import {
  CredentialNotFoundError,
  IdempotencyKeyReusedError,
  InternalServerError,
  InvalidRequest,
  JobAlreadyCancelledError,
  JobNotCancellableError,
  JobNotFoundError,
  JobNotRetryableError,
  MethodNotAllowed,
  OutboxEventNotDeadError,
  OutboxEventNotFoundError,
  PayloadTooLarge,
  PlatformUnavailable,
  QuotaExceededError,
  RouteNotFound,
  TooManyJobsError,
  TooManyStreamsError,
  UnsupportedMediaType
} from "./ApiErrors.js"
import {
  AcceptedJobBatchResponse,
  AcceptedJobStatusResponse,
  AdminJobListParams,
  AdminJobStatusPage,
  AdminJobStatusResponse,
  CreationHeaders,
  CredentialIdParam,
  EventIdParam,
  FeynmanEvaluationBatchRequest,
  FeynmanEvaluationRequest,
  FlashcardGenerationBatchRequest,
  FlashcardGenerationRequest,
  HealthResponse,
  JobArtifactsResponse,
  JobBatchResponse,
  JobEventsHeaders,
  JobEventStream,
  JobIdParam,
  JobStatusPage,
  JobStatusResponse,
  JobWaitParams,
  LearningAnalysisBatchRequest,
  LearningAnalysisRequest,
  NotReady,
  OutboxCountsResponse,
  OutboxEventResponse,
  ReadyResponse,
  ResolveCredentialRequest,
  ResolvedCredentialResponse,
  RetriedJobResponse,
  StoreCredentialRequest,
  StoredCredentialResponse,
  UserJobListParams,
  WorkersResponse
} from "./ApiSchemas.js"
import { AdminAuthentication, Authentication, RuntimeServiceAuthentication } from "./Auth.js"
import { locationHeader, withOptionalEmptyBody, withResponseHeaders, withServerAdditions } from "./openApiAdditions.js"
import { withoutDefaultDecodeError } from "./openApiCleanup.js"
import {
  JobTimelineResponse,
  OutboxEventListParams,
  OutboxEventPage,
  ReplayAllDeadResponse,
  StatsResponse
} from "./OperatorSchemas.js"

/**
 * What every creation endpoint shares: its body, the `Idempotency-Key` header, 202 with what it
 * made or 200 with what the key already made, and the errors of admission and idempotency.
 */
const creationEndpoint = <
  const Name extends string,
  A,
  I,
  Made extends Schema.Schema.Any,
  Existing extends Schema.Schema.Any
>(
  name: Name,
  path: `/api/ai/${string}`,
  payload: Schema.Schema<A, I>,
  answers: { readonly made: Made; readonly existing: Existing },
  summary: string
) =>
  HttpApiEndpoint.post(name, path)
    .setPayload(payload)
    .setHeaders(CreationHeaders)
    .addSuccess(answers.made, { status: 202 })
    .addSuccess(answers.existing)
    .addError(IdempotencyKeyReusedError)
    .addError(TooManyJobsError)
    .addError(QuotaExceededError)
    .annotate(OpenApi.Summary, summary)

/**
 * A creation endpoint: 202 with the new job, or 200 with the job an `Idempotency-Key` already
 * made; every job type's answers the same errors.
 */
const creation = <const Name extends string, A, I>(
  name: Name,
  path: `/api/ai/${string}`,
  payload: Schema.Schema<A, I>,
  summary: string
) =>
  creationEndpoint(name, path, payload, { made: AcceptedJobStatusResponse, existing: JobStatusResponse }, summary)
    .annotate(OpenApi.Transform, withResponseHeaders(202, locationHeader("The new job: `/api/ai/jobs/{jobId}`.")))

/**
 * A batch creation endpoint: 202 with the new jobs in the request's order, or 200 with the jobs
 * an `Idempotency-Key` already made for this batch; the single create's errors, for the whole batch.
 */
const batchCreation = <const Name extends string, A, I>(
  name: Name,
  path: `/api/ai/${string}/batch`,
  payload: Schema.Schema<A, I>,
  summary: string
) =>
  creationEndpoint(name, path, payload, { made: AcceptedJobBatchResponse, existing: JobBatchResponse }, summary)
    .annotate(
      OpenApi.Description,
      "One transaction for the whole batch: every item is created or none is. The user's active-job limit and daily " +
        "quota count the whole batch; an Idempotency-Key covers the batch (same key and body: the same jobs again, with 200)."
    )

/** The end user's jobs (docs/architecture.md §15.1): create, read, list, cancel. */
export class JobsGroup extends HttpApiGroup.make("jobs")
  .add(
    creation(
      "createFlashcardGeneration",
      "/api/ai/flashcard-generations",
      FlashcardGenerationRequest,
      "Generate flashcards from a source text (job type flashcard_generation)"
    )
  )
  .add(
    creation(
      "createFeynmanEvaluation",
      "/api/ai/feynman-evaluations",
      FeynmanEvaluationRequest,
      "Evaluate a Feynman explanation of a concept (job type feynman_evaluation)"
    )
  )
  .add(
    creation(
      "createLearningAnalysis",
      "/api/ai/learning-analyses",
      LearningAnalysisRequest,
      "Analyse recent evaluation results: strengths, gaps and next steps (job type learning_analysis)"
    )
  )
  .add(
    batchCreation(
      "createFlashcardGenerationBatch",
      "/api/ai/flashcard-generations/batch",
      FlashcardGenerationBatchRequest,
      "Generate flashcards from up to 100 source texts at once, all or none (job type flashcard_generation)"
    )
  )
  .add(
    batchCreation(
      "createFeynmanEvaluationBatch",
      "/api/ai/feynman-evaluations/batch",
      FeynmanEvaluationBatchRequest,
      "Evaluate up to 100 Feynman explanations at once, all or none (job type feynman_evaluation)"
    )
  )
  .add(
    batchCreation(
      "createLearningAnalysisBatch",
      "/api/ai/learning-analyses/batch",
      LearningAnalysisBatchRequest,
      "Create up to 100 learning analyses at once, all or none (job type learning_analysis)"
    )
  )
  .add(
    HttpApiEndpoint.get("listJobs", "/api/ai/jobs")
      .setUrlParams(UserJobListParams)
      .addSuccess(JobStatusPage)
      .annotate(OpenApi.Summary, "The caller's jobs, newest first")
  )
  .add(
    HttpApiEndpoint.get("getJob", "/api/ai/jobs/:jobId")
      .setPath(JobIdParam)
      .setUrlParams(JobWaitParams)
      .addSuccess(JobStatusResponse)
      .addError(JobNotFoundError)
      .addError(TooManyStreamsError)
      .annotate(
        OpenApi.Summary,
        "A job's status (the owner's, or any for SUPER_ADMIN); with waitFor=terminal, a long poll"
      )
  )
  .add(
    HttpApiEndpoint.get("jobEvents", "/api/ai/jobs/:jobId/events")
      .setPath(JobIdParam)
      .setHeaders(JobEventsHeaders)
      .addSuccess(JobEventStream)
      .addSuccess(HttpApiSchema.NoContent)
      .addError(JobNotFoundError)
      .addError(TooManyStreamsError)
      .annotate(OpenApi.Summary, "Follow a job live: Server-Sent Events of its JobStatusResponse until it ends")
  )
  .add(
    HttpApiEndpoint.get("getJobArtifacts", "/api/ai/jobs/:jobId/artifacts")
      .setPath(JobIdParam)
      .addSuccess(JobArtifactsResponse)
      .addError(JobNotFoundError)
      .annotate(OpenApi.Summary, "The records a succeeded job's projection wrote")
  )
  .add(
    HttpApiEndpoint.post("cancelJob", "/api/ai/jobs/:jobId/cancel")
      .setPath(JobIdParam)
      .addSuccess(JobStatusResponse)
      .addError(JobNotFoundError)
      .addError(JobNotCancellableError)
      .addError(JobAlreadyCancelledError)
      .annotate(OpenApi.Summary, "Cancel a job: queued ends at once, running stops within seconds")
      .annotate(OpenApi.Transform, withOptionalEmptyBody)
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "jobs")
{}

/** The caller's own provider key (`user_deepseek_key`). */
export class CredentialsGroup extends HttpApiGroup.make("credentials")
  .add(
    HttpApiEndpoint.put("storeDeepseekKey", "/api/ai/credentials/deepseek")
      .setPayload(StoreCredentialRequest)
      .addSuccess(StoredCredentialResponse)
      .annotate(OpenApi.Summary, "Store (encrypted) the caller's DeepSeek key, replacing the previous one")
  )
  .add(
    HttpApiEndpoint.del("revokeDeepseekKey", "/api/ai/credentials/deepseek")
      .addSuccess(HttpApiSchema.NoContent)
      .addError(CredentialNotFoundError)
      .annotate(OpenApi.Summary, "Revoke the caller's DeepSeek key")
      .annotate(OpenApi.Transform, withOptionalEmptyBody)
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "credentials")
{}

/** Operators (SUPER_ADMIN). */
export class AdminGroup extends HttpApiGroup.make("admin")
  .add(
    HttpApiEndpoint.get("listJobs", "/admin-api/ai/jobs")
      .setUrlParams(AdminJobListParams)
      .addSuccess(AdminJobStatusPage)
      .annotate(OpenApi.Summary, "All jobs, newest first, filtered")
  )
  .add(
    HttpApiEndpoint.get("getJob", "/admin-api/ai/jobs/:jobId")
      .setPath(JobIdParam)
      .addSuccess(AdminJobStatusResponse)
      .addError(JobNotFoundError)
      .annotate(OpenApi.Summary, "A job with its internal error message")
  )
  .add(
    HttpApiEndpoint.post("retryJob", "/admin-api/ai/jobs/:jobId/retry")
      .setPath(JobIdParam)
      .addSuccess(RetriedJobResponse, { status: 201 })
      .addError(JobNotFoundError)
      .addError(JobNotRetryableError)
      .annotate(OpenApi.Summary, "Create a new job with the input of a failed or cancelled one")
      .annotate(
        OpenApi.Transform,
        (operation) =>
          withResponseHeaders(201, locationHeader("The new job: `/admin-api/ai/jobs/{jobId}`."))(
            withOptionalEmptyBody(operation)
          )
      )
  )
  .add(
    HttpApiEndpoint.get("outboxCounts", "/admin-api/ai/outbox")
      .addSuccess(OutboxCountsResponse)
      .annotate(OpenApi.Summary, "Outbox events per status")
  )
  .add(
    HttpApiEndpoint.post("replayOutboxEvent", "/admin-api/ai/outbox/:eventId/replay")
      .setPath(EventIdParam)
      .addSuccess(OutboxEventResponse)
      .addError(OutboxEventNotFoundError)
      .addError(OutboxEventNotDeadError)
      .annotate(OpenApi.Summary, "Send a dead outbox event back to pending")
      .annotate(OpenApi.Transform, withOptionalEmptyBody)
  )
  .add(
    HttpApiEndpoint.get("listOutboxEvents", "/admin-api/ai/outbox/events")
      .setUrlParams(OutboxEventListParams)
      .addSuccess(OutboxEventPage)
      .annotate(
        OpenApi.Summary,
        "Outbox events in one status (dead by default; claimed: held by a dispatcher), newest first, with attempts and last error"
      )
  )
  .add(
    HttpApiEndpoint.post("replayAllDeadOutboxEvents", "/admin-api/ai/outbox/replay-dead")
      .addSuccess(ReplayAllDeadResponse)
      .annotate(OpenApi.Summary, "Send every dead outbox event back to pending; answers how many")
      .annotate(OpenApi.Transform, withOptionalEmptyBody)
  )
  .add(
    HttpApiEndpoint.get("jobTimeline", "/admin-api/ai/jobs/:jobId/timeline")
      .setPath(JobIdParam)
      .addSuccess(JobTimelineResponse)
      .addError(JobNotFoundError)
      .annotate(OpenApi.Summary, "A job's attempts, provider calls, recorded lifecycle times and retry links")
  )
  .add(
    HttpApiEndpoint.get("stats", "/admin-api/ai/stats")
      .addSuccess(StatsResponse)
      .annotate(
        OpenApi.Summary,
        "Jobs by type and status, queue depths, outbox backlog, last hour's throughput and durations, usage per day"
      )
  )
  .add(
    HttpApiEndpoint.get("workers", "/admin-api/ai/workers")
      .addSuccess(WorkersResponse)
      .annotate(OpenApi.Summary, "Live workers and the jobs each holds")
  )
  .middleware(AdminAuthentication)
  .annotate(OpenApi.Title, "admin")
{}

/** Service-to-service routes (runtime resolve). */
export class InternalGroup extends HttpApiGroup.make("internal")
  .add(
    HttpApiEndpoint.post("resolveCredential", "/internal/credentials/:credentialId/resolve")
      .setPath(CredentialIdParam)
      .setPayload(ResolveCredentialRequest)
      .addSuccess(ResolvedCredentialResponse)
      .addError(CredentialNotFoundError)
      .annotate(OpenApi.Summary, "The decrypted key of a credential, for the external runtime running the job")
  )
  .middleware(RuntimeServiceAuthentication)
  .annotate(OpenApi.Title, "internal")
{}

/** Liveness and readiness, without authentication. */
export class HealthGroup extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("alive", "/healthz")
      .addSuccess(HealthResponse)
      .annotate(OpenApi.Summary, "The process answers")
  )
  .add(
    HttpApiEndpoint.get("ready", "/readyz")
      .addSuccess(ReadyResponse)
      .addError(NotReady)
      .annotate(OpenApi.Summary, "The database and Redis answer; 503 names the one that does not")
  )
  .annotate(OpenApi.Title, "health")
{}

/** The whole HTTP API; `/openapi.json` and `/docs` describe it. */
export class AiJobApi extends HttpApi.make("ai-job-engine")
  .add(JobsGroup)
  .add(CredentialsGroup)
  .add(AdminGroup)
  .add(InternalGroup)
  .add(HealthGroup)
  .addError(InvalidRequest)
  .addError(InternalServerError)
  .addError(PlatformUnavailable)
  .addError(PayloadTooLarge)
  .addError(UnsupportedMediaType)
  .annotate(OpenApi.Title, "AI Job Engine")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(
    OpenApi.Description,
    "Durable AI jobs: create, follow, cancel, and operate. Errors are JSON { code, message }, a request no route " +
      "takes included (components.responses RouteNotFound and MethodNotAllowed)."
  )
  .annotate(HttpApi.AdditionalSchemas, [RouteNotFound, MethodNotAllowed])
  .annotate(OpenApi.Transform, (spec) => withServerAdditions(withoutDefaultDecodeError(spec)))
{}
