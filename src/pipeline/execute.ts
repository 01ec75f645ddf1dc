import { Cause, Clock, Effect, Exit, Option } from "effect"
import { outputHash } from "../domain/CanonicalJson.js"
import { type ExecutionError, JobTimeoutError } from "../domain/ExecutionError.js"
import { AiGateway, type ChatMessage, type GatewayError, type GenerateResult } from "../services/AiGateway.js"
import { ContentSafety } from "../services/ContentSafety.js"
import { PromptTemplates } from "../services/PromptTemplates.js"
import { type CapacityOutcome, ProviderCapacity } from "../services/ProviderCapacity.js"
import { recordUsage, usageEntryOf } from "./complete.js"
import type { ExecutedJob, ResolvedJob } from "./RunningJob.js"
import { stageDuration, timed } from "../services/EngineMetrics.js"

/** Completion tokens expected when the route sets no `maxTokens`. */
const defaultCompletionEstimate = 1_000

/** Tokens a call is counted for until the provider reports its usage: ~4 characters a token, plus the completion. */
export const estimateTokens = (messages: ReadonlyArray<ChatMessage>, maxTokens: number | undefined) =>
  Math.ceil(messages.reduce((sum, message) => sum + message.content.length, 0) / 4) + (maxTokens ?? defaultCompletionEstimate)

/** What the limiter learns from a call's end: 429s and timeouts are load, an answer is not. */
const capacityOutcomeOf = (exit: Exit.Exit<GenerateResult, GatewayError | JobTimeoutError>): CapacityOutcome => {
  if (Exit.isSuccess(exit)) return { _tag: "Succeeded", totalTokens: exit.value.usage.totalTokens }
  const error: Option.Option<ExecutionError> = Cause.failureOption(exit.cause)
  if (Option.isNone(error)) return { _tag: "Failed" }
  const failure = error.value
  const overloaded = failure._tag === "JobTimeoutError" ||
    (failure._tag === "ProviderError" && (failure.code === "PROVIDER_RATE_LIMITED" || failure.code === "PROVIDER_TIMEOUT"))
  return { _tag: overloaded ? "Overloaded" : "Failed" }
}

/**
 * EXECUTE (docs/architecture.md §8.3), one attempt: the input safety check, the prompt (with the
 * problems of the previous attempt's answer, if any), capacity from the provider limiter (waited
 * for outside the timeout, holding no connection; waiting cannot fail, so it spends no retry), the
 * provider call under the definition's timeout (the timeout interrupts the call, which aborts its
 * HTTP request; a provider's Retry-After pauses the model for every worker), then the output's
 * validation, safety check and hash. Each call's usage row is COMPLETE's: one that ends here is
 * written as it ends; the successful one travels to PROJECT.
 */
export const execute = Effect.fn("pipeline.execute", { captureStackTrace: false })(
  function* (resolved: ResolvedJob, attemptNo: number, problems: ReadonlyArray<string>) {
    yield* Effect.annotateCurrentSpan("attemptNo", attemptNo)
    const gateway = yield* AiGateway
    const templates = yield* PromptTemplates
    const safety = yield* ContentSafety
    const { definition } = resolved.registered
    const { job } = resolved
    const checkSafety = definition.security.contentSafetyCheck

    if (checkSafety) yield* safety.check({ stage: "input", jobType: job.jobType, content: resolved.content })
    const prompt = yield* templates.render({
      jobType: job.jobType,
      promptVersion: job.promptVersion,
      content: resolved.content,
      problems
    })

    const capacity = yield* ProviderCapacity
    const providerModel = `${resolved.route.provider}/${resolved.route.model}`
    const timeoutMs = definition.execution.timeoutMs
    const call = Effect.gen(function* () {
      const permit = yield* capacity.acquire({
        providerModel,
        estimatedTokens: estimateTokens(prompt.messages, resolved.route.maxTokens),
        priority: job.queueName === "ai-interactive" ? "interactive" : "background",
        userId: job.userId
      })
      const startedAt = yield* Clock.currentTimeMillis
      const result = yield* gateway.generate({
        job: { id: job.id, type: job.jobType, attemptNo, leaseNo: resolved.lease.leaseNo },
        messages: prompt.messages,
        provider: resolved.route.provider,
        model: resolved.route.model,
        credential: resolved.credential,
        temperature: resolved.route.temperature,
        maxTokens: resolved.route.maxTokens,
        jsonMode: resolved.route.jsonMode,
        input: resolved.content
      }).pipe(
        Effect.timeoutFail({
          duration: timeoutMs,
          onTimeout: () => new JobTimeoutError({ code: "TIMEOUT", message: `no answer within ${timeoutMs} ms`, timeoutMs })
        }),
        // The slot frees as the answer arrives, before any write; a refusal's Retry-After holds
        // the model back for every worker.
        Effect.onExit((exit) => Effect.zipRight(permit.release(capacityOutcomeOf(exit)), pauseAsked(exit))),
        Effect.onExit((exit) =>
          Exit.isSuccess(exit) ? Effect.void : Effect.flatMap(usageEntryOf(resolved, attemptNo, startedAt, exit), recordUsage)
        )
      )
      return { result, startedAt }
    })
    const pauseAsked = (exit: Exit.Exit<GenerateResult, GatewayError | JobTimeoutError>) => {
      const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
      if (Option.isNone(error) || error.value._tag !== "ProviderError" || error.value.retryAfterMs === undefined) return Effect.void
      const retryAfterMs = error.value.retryAfterMs
      return Effect.flatMap(Clock.currentTimeMillis, (now) => capacity.pause(providerModel, now + retryAfterMs))
    }
    const { result, startedAt } = yield* Effect.scoped(call)
    // The successful call's usage row goes into PROJECT's transaction; if this attempt ends here
    // instead (an answer that does not validate, a cancel), it is written now.
    const usage = yield* usageEntryOf(resolved, attemptNo, startedAt, Exit.succeed(result))

    return yield* Effect.gen(function* () {
      const output = yield* resolved.registered.decodeOutput(result.json, resolved.content)
      if (checkSafety) yield* safety.check({ stage: "output", jobType: job.jobType, content: output })
      const hash = outputHash(output)
      yield* Effect.logInfo("output validated").pipe(Effect.annotateLogs({ outputHash: hash }))
      return { ...resolved, output, outputHash: hash, usage } satisfies ExecutedJob
    }).pipe(Effect.onError(() => recordUsage(usage)))
  },
  (effect, _resolved, attemptNo) => Effect.annotateLogs(effect, { stage: "EXECUTE", attempt: attemptNo }),
  timed(stageDuration, { stage: "execute" })
)
