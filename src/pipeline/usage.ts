import { Cause, Clock, Effect, Exit, Option } from "effect"
import type { ExecutionError } from "../domain/ExecutionError.js"
import { newId } from "../domain/Ids.js"
import { AiCostCalculator } from "../services/AiCostCalculator.js"
import type { GenerateResult } from "../services/AiGateway.js"
import { type NewUsageLogEntry, UsageLog } from "../services/UsageLog.js"
import type { ResolvedJob, ResolvedTarget } from "./RunningJob.js"

/**
 * The usage row of one provider call (docs/architecture.md §11.5), failed and interrupted calls
 * included (tokens 0, the error code set). EXECUTE builds it when the call ends. The row names the
 * target the call went to (the route's first by default) and the model the provider says answered;
 * the price is the target's model's, whatever name the provider reports.
 */
export const usageEntryOf = (
  resolved: ResolvedJob,
  attemptNo: number,
  startedAtMillis: number,
  exit: Exit.Exit<GenerateResult, ExecutionError>,
  target: ResolvedTarget = resolved.targets[0]
) =>
  Effect.gen(function*() {
    const costs = yield* AiCostCalculator
    const finishedAtMillis = yield* Clock.currentTimeMillis
    const result = Exit.isSuccess(exit) ? exit.value : undefined
    const usage = result?.usage ?? { promptTokens: 0, completionTokens: 0, totalTokens: 0 }
    const errorCode = Exit.isSuccess(exit) ? null : Exit.isInterrupted(exit) ? "CANCELLED" : failureCodeOf(exit)
    return {
      id: yield* newId,
      jobId: resolved.job.id,
      leaseNo: resolved.lease.leaseNo,
      attemptNo,
      credentialMode: target.credential.mode,
      provider: result?.provider ?? target.provider,
      model: result?.model ?? target.model,
      promptTokens: usage.promptTokens,
      completionTokens: usage.completionTokens,
      totalTokens: usage.totalTokens,
      costMicros: yield* costs.costMicros(target.model, usage),
      latencyMs: Math.max(0, Math.round(result?.latencyMs ?? finishedAtMillis - startedAtMillis)),
      errorCode,
      ...(result?.usageEstimated === true ? { usageEstimated: true } : {})
    } satisfies NewUsageLogEntry
  })

const failureCodeOf = (exit: Exit.Failure<GenerateResult, ExecutionError>): string =>
  Option.match(Cause.failureOption(exit.cause), { onNone: () => "INTERNAL_ERROR", onSome: (error) => error.code })

/**
 * Writes a usage row on its own, now: a failed or interrupted call's, or the successful call's
 * when its projection rolled back for good. One that cannot be written is logged and does not
 * fail the job: the call happened either way.
 */
export const recordUsage = (entry: NewUsageLogEntry) =>
  Effect.flatMap(UsageLog, (usageLog) => usageLog.record(entry)).pipe(
    Effect.catchAll((error) =>
      Effect.logWarning("usage row not written").pipe(Effect.annotateLogs({ operation: error.operation }))
    ),
    Effect.asVoid,
    Effect.uninterruptible
  )

/**
 * Writes the successful call's usage row inside the caller's transaction (PROJECT's): it commits
 * with the result or not at all, so a crash neither loses it nor counts it twice. A failure fails
 * the transaction.
 */
export const recordUsageWithResult = (entry: NewUsageLogEntry) =>
  Effect.flatMap(UsageLog, (usageLog) => usageLog.record(entry))
