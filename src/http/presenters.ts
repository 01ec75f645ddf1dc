import { HttpServerResponse } from "@effect/platform"
import { Effect, Schema } from "effect"
import type { AiJob } from "../domain/AiJob.js"
import type { StoredArtifact } from "../services/ArtifactRepository.js"
import { AdminJobStatusResponse, JobCursor, JobStatusResponse, RetriedJobResponse } from "./ApiSchemas.js"

/** AiJob rows → the API's answers. The operator's view adds the internal fields to the user's. */

const iso = (date: Date | null): string | undefined => (date === null ? undefined : date.toISOString())

const genericFailure = "The job failed."

/**
 * A public message never carries a stack, a path or an address. The engine stores fixed text per
 * code; this is the last line of defence should anything else ever land there.
 */
const looksInternal = (text: string): boolean =>
  text.length > 300 ||
  /\n\s*at\s/.test(text) || // a stack frame
  /(^|[\s(])(\/|[A-Za-z]:\\)[\w.-]+[/\\]/.test(text) || // a file path
  /\b\d{1,3}(\.\d{1,3}){3}\b/.test(text) || // an IPv4 address
  /\[?[0-9a-f]{0,4}(:[0-9a-f]{0,4}){2,7}\]?:\d+/i.test(text) || // an IPv6 address with port
  /\b[\w.-]+:\d{2,5}\b/.test(text) || // host:port
  /\w+:\/\/\S+/.test(text) // a URL

export const safePublicMessage = (job: AiJob): string | undefined => {
  if (job.publicErrorMessage === null) return job.errorCode === null ? undefined : genericFailure
  return looksInternal(job.publicErrorMessage) ? genericFailure : job.publicErrorMessage
}

const resultOf = (job: AiJob, artifacts: ReadonlyArray<StoredArtifact>) =>
  job.lifecycleStatus === "succeeded"
    ? {
      artifactCount: artifacts.length,
      artifacts: artifacts.map((a) => ({ artifactType: a.artifactType, artifactId: a.artifactId }))
    }
    : undefined

const statusFields = (job: AiJob, artifacts: ReadonlyArray<StoredArtifact>) => ({
  jobId: job.id,
  jobType: job.jobType,
  lifecycleStatus: job.lifecycleStatus,
  queueName: job.queueName,
  priority: job.priority,
  progress: job.progress,
  createdAt: job.createdAt.toISOString(),
  startedAt: iso(job.startedAt),
  finishedAt: iso(job.finishedAt),
  errorCode: job.errorCode ?? undefined,
  publicErrorMessage: safePublicMessage(job),
  result: resultOf(job, artifacts)
})

const adminFields = (job: AiJob, artifacts: ReadonlyArray<StoredArtifact>) => ({
  ...statusFields(job, artifacts),
  userId: job.userId,
  targetType: job.targetType,
  targetId: job.targetId,
  credentialMode: job.credentialMode,
  attemptCount: job.attemptCount,
  maxAttempts: job.maxAttempts,
  cancelRequestedAt: iso(job.cancelRequestedAt),
  updatedAt: job.updatedAt.toISOString(),
  internalErrorMessage: job.internalErrorMessage ?? undefined
})

// Built from typed fields and checked once, by the encoding every answer goes through (the
// endpoint's success schema, or the event stream's encoder): not validated again here.
const built = { disableValidation: true } as const

export const jobStatusResponse = (job: AiJob, artifacts: ReadonlyArray<StoredArtifact>) =>
  new JobStatusResponse(statusFields(job, artifacts), built)

export const adminJobStatusResponse = (job: AiJob, artifacts: ReadonlyArray<StoredArtifact>) =>
  new AdminJobStatusResponse(adminFields(job, artifacts), built)

export const retriedJobResponse = (job: AiJob) => new RetriedJobResponse(adminFields(job, []), built)

// The status fields are already what `JobStatusResponse` encodes to (strings and numbers, in the
// schema's order, an absent one undefined), so the answers of the hot routes (a status read, a
// create's 202) are written from them directly: no class is built only to be encoded again.

/** `JobStatusResponse` as a 200 answer: the body the endpoint's success schema would write. */
export const jobStatusAnswer = (job: AiJob, artifacts: ReadonlyArray<StoredArtifact>) =>
  HttpServerResponse.unsafeJson(statusFields(job, artifacts))

/** `AcceptedJobStatusResponse` as the 202 of a create that made `job`, with its `Location`. */
export const acceptedJobAnswer = (job: AiJob) =>
  HttpServerResponse.unsafeJson(statusFields(job, []), {
    status: 202,
    headers: { location: `/api/ai/jobs/${encodeURIComponent(job.id)}` }
  })

/** `AcceptedJobBatchResponse` as the 202 of a batch create that made `jobs`. */
export const acceptedJobBatchAnswer = (jobs: ReadonlyArray<AiJob>) =>
  HttpServerResponse.unsafeJson({ jobs: jobs.map((job) => statusFields(job, [])) }, { status: 202 })

const encodeCursor = Schema.encode(JobCursor)

/** The opaque cursor after `job`. Encoding a Date and a string cannot fail. */
export const cursorOf = (item: { readonly createdAt: Date; readonly id: string }): Effect.Effect<string> =>
  encodeCursor({ createdAt: item.createdAt, id: item.id }).pipe(Effect.orDie)

export const cursorAfter = (job: AiJob): Effect.Effect<string> =>
  encodeCursor({ createdAt: job.createdAt, id: job.id }).pipe(Effect.orDie)
