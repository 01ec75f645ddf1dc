import type { HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import { AiJob } from "../../../src/domain/AiJob.js"
import { AcceptedJobBatchResponse, AcceptedJobStatusResponse, JobStatusResponse } from "../../../src/http/ApiSchemas.js"
import {
  acceptedJobAnswer,
  acceptedJobBatchAnswer,
  jobStatusAnswer,
  jobStatusResponse
} from "../../../src/http/presenters.js"
import type { StoredArtifact } from "../../../src/services/ArtifactRepository.js"

const at = (iso: string) => new Date(iso)

const job = (overrides: Partial<ConstructorParameters<typeof AiJob>[0]> = {}) =>
  new AiJob({
    id: "0190c1d2-aaaa-7bbb-8ccc-0123456789ab",
    userId: "user-1",
    jobType: "flashcard_generation",
    targetType: "flashcard_deck",
    targetId: "deck-1",
    idempotencyKey: null,
    requestHash: null,
    status: "pending",
    lifecycleStatus: "queued",
    queueName: "ai-background",
    priority: 50,
    progress: 0,
    input: { sourceText: "text", count: 3 },
    credentialMode: "platform_key",
    credentialId: null,
    promptVersion: "v1",
    inputSchemaVersion: "v1",
    outputSchemaVersion: "v1",
    attemptCount: 0,
    maxAttempts: 3,
    leaseNo: 0,
    lockedBy: null,
    lockedAt: null,
    lockUntil: null,
    cancelRequestedAt: null,
    startedAt: null,
    finishedAt: null,
    errorCode: null,
    publicErrorMessage: null,
    internalErrorMessage: null,
    outputHash: null,
    createdAt: at("2024-05-01T10:00:00.123Z"),
    updatedAt: at("2024-05-01T10:00:00.123Z"),
    ...overrides
  })

const artifact = (ordinal: number): StoredArtifact => ({
  id: `artifact-row-${ordinal}`,
  jobId: "0190c1d2-aaaa-7bbb-8ccc-0123456789ab",
  artifactType: "flashcard",
  artifactId: `card-${ordinal}`,
  ordinal,
  createdAt: at("2024-05-01T10:00:02.000Z")
})

const jobs: ReadonlyArray<readonly [AiJob, ReadonlyArray<StoredArtifact>]> = [
  [job(), []],
  [
    job({
      id: "job/with space",
      lifecycleStatus: "running",
      status: "processing",
      progress: 40,
      startedAt: at("2024-05-01T10:00:01.000Z")
    }),
    []
  ],
  [
    job({
      lifecycleStatus: "succeeded",
      status: "completed",
      progress: 100,
      startedAt: at("2024-05-01T10:00:01.000Z"),
      finishedAt: at("2024-05-01T10:00:02.000Z")
    }),
    [artifact(0), artifact(1)]
  ],
  [
    job({
      lifecycleStatus: "failed",
      status: "failed",
      errorCode: "PROVIDER_TIMEOUT",
      publicErrorMessage: "The provider did not answer in time.",
      finishedAt: at("2024-05-01T10:00:02.000Z")
    }),
    []
  ],
  // A stored message that looks internal is answered with the generic one.
  [
    job({
      lifecycleStatus: "failed",
      status: "failed",
      errorCode: "INTERNAL_ERROR",
      publicErrorMessage: "at /srv/app.js:1"
    }),
    []
  ],
  [job({ lifecycleStatus: "cancelled", status: "cancelled", cancelRequestedAt: at("2024-05-01T10:00:01.000Z") }), []]
]

const bodyOf = (response: HttpServerResponse.HttpServerResponse) =>
  response.body._tag === "Uint8Array" ? new TextDecoder().decode(response.body.body) : `(a ${response.body._tag} body)`

describe("status answers written from the fields: the bytes the endpoint's schema encodes", () => {
  it("a status read: 200, application/json, JobStatusResponse's encoding", () => {
    for (const [each, artifacts] of jobs) {
      const answer = jobStatusAnswer(each, artifacts)
      expect(answer.status).toBe(200)
      expect(answer.body._tag === "Uint8Array" && answer.body.contentType).toBe("application/json")
      expect(bodyOf(answer)).toBe(
        JSON.stringify(Schema.encodeSync(JobStatusResponse)(jobStatusResponse(each, artifacts)))
      )
    }
  })

  it("a create's 202: AcceptedJobStatusResponse's encoding and the job's Location", () => {
    for (const [each] of jobs) {
      const answer = acceptedJobAnswer(each)
      expect(answer.status).toBe(202)
      expect(answer.headers["location"]).toBe(`/api/ai/jobs/${encodeURIComponent(each.id)}`)
      expect(bodyOf(answer)).toBe(
        JSON.stringify(
          Schema.encodeSync(AcceptedJobStatusResponse)(new AcceptedJobStatusResponse(jobStatusResponse(each, [])))
        )
      )
    }
  })

  it("a batch create's 202: AcceptedJobBatchResponse's encoding, in the jobs' order", () => {
    const made = jobs.map(([each]) => each)
    const answer = acceptedJobBatchAnswer(made)
    expect(answer.status).toBe(202)
    expect(bodyOf(answer)).toBe(
      JSON.stringify(
        Schema.encodeSync(AcceptedJobBatchResponse)(
          new AcceptedJobBatchResponse({
            jobs: made.map((each) => new AcceptedJobStatusResponse(jobStatusResponse(each, [])))
          })
        )
      )
    )
  })
})
