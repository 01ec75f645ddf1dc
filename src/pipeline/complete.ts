import { Cause, Clock, Effect, Exit, Option } from "effect"
import type { AiJob } from "../domain/AiJob.js"
import type { ExecutionError } from "../domain/ExecutionError.js"
import { newId } from "../domain/Ids.js"
import { AiCostCalculator } from "../services/AiCostCalculator.js"
import type { GenerateResult } from "../services/AiGateway.js"
import { DomainEvents } from "../services/DomainEvents.js"
import { type NewUsageLogEntry, UsageLog } from "../services/UsageLog.js"
import type { ResolvedJob } from "./RunningJob.js"

/**
 * COMPLETE (ADR 5.7): the usage row of one provider call, failed and interrupted calls
 * included (tokens 0, the error code set).
 */
export const usageEntryOf = (
  resolved: ResolvedJob,
  attemptNo: number,
  startedAtMillis: number,
  exit: Exit.Exit<GenerateResult, ExecutionError>
) =>
  Effect.gen(function* () {
    const costs = yield* AiCostCalculator
    const finishedAtMillis = yield* Clock.currentTimeMillis
    const result = Exit.isSuccess(exit) ? exit.value : undefined
    const usage = result?.usage ?? { promptTokens: 0, completionTokens: 0, totalTokens: 0 }
    const model = result?.model ?? resolved.route.model
    const errorCode = Exit.isSuccess(exit) ? null : Exit.isInterrupted(exit) ? "CANCELLED" : failureCodeOf(exit)
    return {
      id: yield* newId,
      jobId: resolved.job.id,
      leaseNo: resolved.lease.leaseNo,
      attemptNo,
      credentialMode: resolved.credential.mode,
      provider: result?.provider ?? resolved.route.provider,
      model,
      promptTokens: usage.promptTokens,
      completionTokens: usage.completionTokens,
      totalTokens: usage.totalTokens,
      costMicros: yield* costs.costMicros(model, usage),
      latencyMs: Math.max(0, Math.round(result?.latencyMs ?? finishedAtMillis - startedAtMillis)),
      errorCode
    } satisfies NewUsageLogEntry
  })

/**
 * Writes a usage row now. One that cannot be written is logged and does not fail the job: the
 * call happened either way. (A successful call's row is written by PROJECT, in its transaction.)
 */
export const recordUsage = (entry: NewUsageLogEntry) =>
  Effect.flatMap(UsageLog, (usageLog) => usageLog.record(entry)).pipe(
    Effect.catchAll((error) =>
      Effect.logWarning("usage row not written").pipe(Effect.annotateLogs({ operation: error.operation }))
    ),
    Effect.asVoid,
    Effect.uninterruptible
  )

const failureCodeOf = (exit: Exit.Failure<GenerateResult, ExecutionError>): string =>
  Option.match(Cause.failureOption(exit.cause), { onNone: () => "INTERNAL_ERROR", onSome: (error) => error.code })

/** COMPLETE (ADR 5.1): the domain event of a job that reached a terminal state. */
export const publishFinished = (job: AiJob) =>
  Effect.gen(function* () {
    const events = yield* DomainEvents
    if (job.lifecycleStatus !== "succeeded" && job.lifecycleStatus !== "failed" && job.lifecycleStatus !== "cancelled") return
    yield* events.publish({
      _tag: "JobFinished",
      jobId: job.id,
      jobType: job.jobType,
      userId: job.userId,
      status: job.lifecycleStatus,
      errorCode: job.errorCode,
      outputHash: job.outputHash,
      at: job.finishedAt ?? job.updatedAt
    })
  })
