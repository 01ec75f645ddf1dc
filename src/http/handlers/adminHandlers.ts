import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import type { AiJob } from "../../domain/AiJob.js"
import { AiJobService } from "../../services/AiJobService.js"
import { CredentialVault } from "../../services/CredentialVault.js"
import { OutboxAdmin } from "../../services/outbox/OutboxAdmin.js"
import { WorkerDirectory } from "../../services/WorkerDirectory.js"
import { AiJobApi } from "../Api.js"
import { JobNotRetryableError, OutboxEventNotDeadError, OutboxEventNotFoundError } from "../ApiErrors.js"
import { CurrentUser } from "../Auth.js"
import { fromInvalidJobInput, fromPersistence, fromUnknownJobType } from "../errorMapping.js"
import { PlatformGate } from "../PlatformGate.js"
import { adminJobStatusResponse, retriedJobResponse } from "../presenters.js"
import { withoutRequestBody } from "../requestBody.js"
import { setAnswerHeader } from "../responseHeaders.js"
import { makeJobViews } from "./jobViews.js"
import { makeOperatorViews } from "./operatorViews.js"

const retryable: ReadonlyArray<AiJob["lifecycleStatus"]> = ["failed", "cancelled"]

/** Operators: every job with its internal detail, retries, the outbox and the workers. */
export const AdminHandlersLive = HttpApiBuilder.group(AiJobApi, "admin", (handlers) =>
  Effect.gen(function*() {
    const service = yield* AiJobService
    const outbox = yield* OutboxAdmin
    const workers = yield* WorkerDirectory
    const vault = yield* CredentialVault
    const gate = yield* PlatformGate
    const views = yield* makeJobViews
    const operator = yield* makeOperatorViews

    const adminStatusOf = (job: AiJob) =>
      Effect.map(views.artifactsOf(job), (artifacts) => adminJobStatusResponse(job, artifacts))

    /**
     * A user-key job is retried with the user's key as it is now (the old one may have been
     * replaced); without an active key it keeps the old id and fails at RESOLVE, visibly.
     */
    const credentialOf = (job: AiJob) =>
      job.credentialMode === "user_deepseek_key"
        ? Effect.map(vault.activeCredentialId(job.userId), (active) => ({
          credentialMode: job.credentialMode,
          credentialId: Option.getOrUndefined(Option.orElse(active, () => Option.fromNullable(job.credentialId)))
        }))
        : Effect.succeed({ credentialMode: job.credentialMode, credentialId: undefined })

    return handlers
      .handle("listJobs", ({ urlParams }) =>
        views.page(
          {
            jobType: urlParams.jobType,
            statuses: urlParams.status === undefined ? undefined : [urlParams.status],
            queueName: urlParams.queueName,
            createdFrom: urlParams.createdFrom,
            createdTo: urlParams.createdTo
          },
          urlParams,
          adminStatusOf
        ))
      .handle("getJob", ({ path }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          return yield* adminStatusOf(yield* views.findVisible(path.jobId, user, { admins: true }))
        }))
      .handle(
        "retryJob",
        ({ path }) =>
          withoutRequestBody(Effect.gen(function*() {
            const admin = yield* CurrentUser
            const original = yield* views.find(path.jobId)
            if (!retryable.includes(original.lifecycleStatus)) {
              return yield* Effect.fail(
                new JobNotRetryableError({
                  message: `The job is ${original.lifecycleStatus}; only failed or cancelled jobs can be retried.`
                })
              )
            }
            yield* gate.ensureOpen
            const credential = yield* credentialOf(original)
            // The user was admitted once already: an operator's retry skips the user's limits.
            const { job } = yield* service.createJob({
              userId: original.userId,
              jobType: original.jobType,
              targetType: original.targetType,
              targetId: original.targetId,
              input: original.input,
              enforceQuotas: false,
              retryOf: original.id,
              overrides: { priority: original.priority, ...credential }
            })
            yield* Effect.logInfo("job retried by an operator").pipe(
              Effect.annotateLogs({ jobId: job.id, retryOf: original.id, adminId: admin.userId })
            )
            yield* setAnswerHeader("location", `/admin-api/ai/jobs/${encodeURIComponent(job.id)}`)
            return retriedJobResponse(job)
          })).pipe(
            Effect.catchTags({
              UnknownJobType: fromUnknownJobType,
              InvalidJobInput: fromInvalidJobInput,
              // Impossible with enforceQuotas: false; a defect (500) if it ever happens.
              TooManyJobs: Effect.die,
              // Impossible without an idempotency key.
              IdempotencyKeyReused: Effect.die,
              QuotaExceeded: Effect.die,
              PersistenceError: fromPersistence
            })
          ),
        { uninterruptible: true }
      )
      .handle("outboxCounts", () => outbox.counts.pipe(Effect.catchTag("PersistenceError", fromPersistence)))
      .handle(
        "replayOutboxEvent",
        ({ path }) =>
          withoutRequestBody(Effect.gen(function*() {
            const admin = yield* CurrentUser
            const event = yield* outbox.replayDead(path.eventId)
            yield* Effect.logInfo("outbox event replayed by an operator").pipe(
              Effect.annotateLogs({ eventId: event.id, adminId: admin.userId })
            )
            return {
              eventId: event.id,
              eventType: event.eventType,
              aggregateType: event.aggregateType,
              aggregateId: event.aggregateId,
              status: event.status,
              attemptCount: event.attemptCount,
              availableAt: event.availableAt.toISOString(),
              lastError: event.lastError ?? undefined
            }
          })).pipe(
            Effect.catchTags({
              OutboxEventNotFound: () =>
                Effect.fail(new OutboxEventNotFoundError({ message: "No outbox event has this id." })),
              OutboxEventNotDead: (error) =>
                Effect.fail(
                  new OutboxEventNotDeadError({
                    message: `The event is ${error.status}; only dead events can be replayed.`
                  })
                ),
              PersistenceError: fromPersistence
            })
          ),
        { uninterruptible: true }
      )
      .handle("listOutboxEvents", ({ urlParams }) => operator.outboxPage(urlParams))
      .handle(
        "replayAllDeadOutboxEvents",
        () =>
          withoutRequestBody(Effect.gen(function*() {
            const admin = yield* CurrentUser
            const replayed = yield* outbox.replayAllDead.pipe(Effect.catchTag("PersistenceError", fromPersistence))
            yield* Effect.logInfo("dead outbox events replayed by an operator").pipe(
              Effect.annotateLogs({ replayed, adminId: admin.userId })
            )
            return { replayed }
          })),
        { uninterruptible: true }
      )
      .handle("jobTimeline", ({ path }) =>
        Effect.gen(function*() {
          const job = yield* views.find(path.jobId)
          const parts = yield* operator.timelineParts(job)
          return { job: yield* adminStatusOf(job), ...parts }
        }))
      .handle("stats", () => operator.stats)
      .handle("workers", () => Effect.map(workers.live, (live) => ({ workers: live })))
  }))
