import { Cause, Clock, Duration, Effect, Exit, Option } from "effect"
import { ProviderSettings } from "../config/ProviderSettings.js"
import { outputHash } from "../domain/CanonicalJson.js"
import { type ExecutionError, JobTimeoutError, ProviderError } from "../domain/ExecutionError.js"
import { isRetryable } from "../domain/RetryPolicy.js"
import { AiGateway, type ChatMessage, type GatewayError, type GenerateResult } from "../services/AiGateway.js"
import { ContentSafety } from "../services/ContentSafety.js"
import { stageDuration, timed } from "../services/EngineMetrics.js"
import { PromptTemplates } from "../services/PromptTemplates.js"
import { type CapacityOutcome, type CapacityWaitExceeded, ProviderCapacity } from "../services/ProviderCapacity.js"
import { type Admission, type BreakerOutcome, ProviderCircuitBreaker } from "../services/ProviderCircuitBreaker.js"
import type { ExecutedJob, ResolvedJob, ResolvedTarget } from "./RunningJob.js"
import { stageSpan } from "./stageSpan.js"
import { recordUsage, usageEntryOf } from "./usage.js"

/** Completion tokens expected when the route sets no `maxTokens`. */
const defaultCompletionEstimate = 1_000

/** Tokens a call is counted for until the provider reports its usage: ~4 characters a token, plus the completion. */
export const estimateTokens = (messages: ReadonlyArray<ChatMessage>, maxTokens: number | undefined) =>
  Math.ceil(messages.reduce((sum, message) => sum + message.content.length, 0) / 4) +
  (maxTokens ?? defaultCompletionEstimate)

type CallExit = Exit.Exit<GenerateResult, GatewayError | JobTimeoutError>

const failureOf = (exit: CallExit): Option.Option<GatewayError | JobTimeoutError> =>
  Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()

/** What the limiter learns from a call's end: 429s and timeouts are load, an answer is not. */
const capacityOutcomeOf = (exit: CallExit): CapacityOutcome => {
  if (Exit.isSuccess(exit)) return { _tag: "Succeeded", totalTokens: exit.value.usage.totalTokens }
  const error = failureOf(exit)
  if (Option.isNone(error)) return { _tag: "Failed" }
  const failure = error.value
  if (failure._tag === "ProviderError" && failure.sent === false) return { _tag: "NotSent" }
  const overloaded = failure._tag === "JobTimeoutError" ||
    (failure._tag === "ProviderError" &&
      (failure.code === "PROVIDER_RATE_LIMITED" || failure.code === "PROVIDER_TIMEOUT"))
  return { _tag: overloaded ? "Overloaded" : "Failed" }
}

/**
 * What the circuit breaker learns: the provider failed (no answer, a 5xx, a body that is no
 * answer), answered (anything else, a 429 or an output the job rejects included), or the call
 * was stopped from outside.
 */
const breakerOutcomeOf = (exit: CallExit): BreakerOutcome => {
  if (Exit.isSuccess(exit)) return "success"
  const error = failureOf(exit)
  if (Option.isNone(error)) return Exit.isInterrupted(exit) ? "abandoned" : "success"
  const failure = error.value
  switch (failure._tag) {
    case "JobTimeoutError":
      return "failure"
    case "ProviderError":
      return failure.code === "PROVIDER_UNAVAILABLE" || failure.code === "PROVIDER_TIMEOUT" ||
          failure.code === "PROVIDER_RESPONSE_TOO_LARGE"
        ? "failure"
        : "success"
    case "ValidationError":
      return failure.code === "VALIDATION_PROVIDER_RESPONSE" ? "failure" : "success"
    default:
      return "success"
  }
}

/**
 * Whether a failure moves the call on to the route's next target, within the attempt: the
 * provider's own trouble does (no answer, a 5xx, a refused request, a 429 that asks for a longer
 * wait than the route allows, a platform key the provider rejects); what belongs to the job does
 * not (its output, its content, its time budget, the user's own key).
 */
const movesOn = (error: ExecutionError, target: ResolvedTarget, maxWaitMs: number): boolean => {
  switch (error._tag) {
    case "ProviderError":
      return error.code !== "PROVIDER_RATE_LIMITED" || error.retryAfterMs === undefined ||
        error.retryAfterMs > maxWaitMs
    case "ValidationError":
      return error.code === "VALIDATION_PROVIDER_RESPONSE"
    case "CredentialError":
      return error.code === "CREDENTIAL_INVALID" && target.credential.mode === "platform_key"
    default:
      return false
  }
}

/** A wait the provider asked for, cut to `AI_MAX_RETRY_AFTER_MS`: it also sets the retry's delay. */
const boundedWait = <E extends ExecutionError>(error: E, maxRetryAfterMs: number): E | ProviderError =>
  error._tag === "ProviderError" && error.retryAfterMs !== undefined && error.retryAfterMs > maxRetryAfterMs
    ? new ProviderError({
      code: error.code,
      message: error.message,
      retryAfterMs: maxRetryAfterMs,
      ...(error.sent === undefined ? {} : { sent: error.sent })
    })
    : error

/** The limiter would hold the call past the route's wait or the job's budget. */
const waitedTooLong = (providerModel: string, waited: CapacityWaitExceeded, now: number) =>
  new ProviderError({
    code: "PROVIDER_RATE_LIMITED",
    message: waited.paused
      ? `${providerModel} is paused past what the job may wait (the provider asked for a wait)`
      : `${providerModel} has no capacity within the route's wait`,
    ...(waited.retryAt === undefined ? {} : { retryAfterMs: Math.max(0, waited.retryAt - now) }),
    sent: false
  })

/**
 * The attempt's error when every target failed: the last one, unless it would stop the retries
 * (a refused request, a rejected key) while an earlier target failed for a passing reason.
 */
const attemptError = (
  failures: ReadonlyArray<ExecutionError>,
  resolved: ResolvedJob
): Option.Option<ExecutionError> => {
  const last = failures.at(-1)
  if (last === undefined) return Option.none()
  const definition = resolved.registered.definition
  if (isRetryable(last, definition)) return Option.some(last)
  return Option.some([...failures].reverse().find((failure) => isRetryable(failure, definition)) ?? last)
}

/**
 * EXECUTE, one attempt (docs/architecture.md §8.3). Earlier targets and pauses spend the job's
 * one time budget, so a fallback gets only what is left; usage rows are written as each call ends.
 * `attemptNo` numbers the attempt's first call; a fallback call takes `nextCallNo`.
 */
export const execute = Effect.fnUntraced(
  function*(
    resolved: ResolvedJob,
    attemptNo: number,
    problems: ReadonlyArray<string>,
    nextCallNo?: Effect.Effect<number>
  ) {
    yield* Effect.annotateCurrentSpan("attemptNo", attemptNo)
    const gateway = yield* AiGateway
    const templates = yield* PromptTemplates
    const safety = yield* ContentSafety
    const capacity = yield* ProviderCapacity
    const breaker = yield* ProviderCircuitBreaker
    const maxRetryAfterMs = Duration.toMillis((yield* ProviderSettings).maxRetryAfter)
    const { definition, outputJsonSchema } = resolved.registered
    const { job, route } = resolved
    const checkSafety = definition.security.contentSafetyCheck
    const timeoutMs = definition.execution.timeoutMs
    const timeout = Duration.millis(timeoutMs)

    if (checkSafety) yield* safety.check({ stage: "input", jobType: job.jobType, content: resolved.content })
    const prompt = yield* templates.render({
      jobType: job.jobType,
      promptVersion: job.promptVersion,
      content: resolved.content,
      problems
    })
    const estimatedTokens = estimateTokens(prompt.messages, route.maxTokens)
    const priority = job.queueName === "ai-interactive" ? "interactive" as const : "background" as const
    let callsMade = 0
    const takeCallNo = Effect.suspend(() => {
      const nth = callsMade++
      return nth === 0 ? Effect.succeed(attemptNo) : nextCallNo ?? Effect.succeed(attemptNo + nth)
    })
    // The job's time budget for this attempt: calls and waits the provider asked for count against it.
    let spent = Duration.zero

    /**
     * One call to `target`. Only its waits can be interrupted (for capacity, for the answer): once
     * the answer is in, its slot, pause, breaker verdict and usage row are recorded whatever stops
     * the run, so a call the provider billed is never written as unanswered.
     */
    const call = (
      target: ResolvedTarget,
      admission: Admission,
      last: boolean,
      restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
    ) =>
      Effect.gen(function*() {
        const providerModel = `${target.provider}/${target.model}`
        const credentialId = target.credential.mode === "user_deepseek_key"
          ? target.credential.credentialId ?? undefined
          : undefined
        const waited = yield* Effect.exit(restore(capacity.acquire({
          providerModel,
          estimatedTokens,
          priority,
          userId: job.userId,
          ...(credentialId === undefined ? {} : { credentialId }),
          ...(last || route.maxWaitMs === undefined ? {} : { maxWait: Duration.millis(route.maxWaitMs) }),
          maxPaused: Duration.subtract(timeout, spent)
        })))
        if (Exit.isFailure(waited)) {
          yield* breaker.record(providerModel, admission, "abandoned")
          const tooLong = Cause.failureOption(waited.cause)
          if (Option.isNone(tooLong)) return yield* Effect.failCause(Cause.stripFailures(waited.cause))
          return yield* Effect.fail(waitedTooLong(providerModel, tooLong.value, yield* Clock.currentTimeMillis))
        }
        const permit = waited.value
        spent = Duration.sum(spent, permit.paused ?? Duration.zero)
        const budget = Duration.subtract(timeout, spent)
        const callNo = yield* takeCallNo
        const startedAt = yield* Clock.currentTimeMillis
        // A deadline that first lets an answer already received be read (after a process pause,
        // every timer is due at once and timers run before sockets are read).
        const budgetSpent = Effect.sleep(budget).pipe(
          Effect.zipRight(gateway.settle ?? Effect.void),
          // Made when the budget is spent, not on every call (an error's stack is costly to capture).
          Effect.zipRight(Effect.failSync(() =>
            new JobTimeoutError({ code: "TIMEOUT", message: `no answer within ${timeoutMs} ms`, timeoutMs })
          ))
        )
        const exit: CallExit = yield* Effect.exit(restore(
          gateway.generate({
            job: { id: job.id, type: job.jobType, attemptNo: callNo, leaseNo: resolved.lease.leaseNo },
            messages: prompt.messages,
            provider: target.provider,
            model: target.model,
            credential: target.credential,
            temperature: route.temperature,
            maxTokens: route.maxTokens,
            jsonMode: route.jsonMode,
            input: resolved.content,
            ...(outputJsonSchema === undefined ? {} : { outputSchema: { name: job.jobType, schema: outputJsonSchema } })
          }).pipe(Effect.raceFirst(budgetSpent))
        ))
        const now = yield* Clock.currentTimeMillis
        spent = Duration.sum(spent, Duration.millis(Math.max(0, now - startedAt)))
        // The slot frees as the answer arrives, before any write; a refusal's Retry-After holds
        // the model (or the user's own key) back for every worker.
        yield* permit.release(capacityOutcomeOf(exit))
        const failure = failureOf(exit)
        if (
          Option.isSome(failure) && failure.value._tag === "ProviderError" && failure.value.retryAfterMs !== undefined
        ) {
          yield* capacity.pause(
            providerModel,
            now + Math.min(failure.value.retryAfterMs, maxRetryAfterMs),
            credentialId
          )
        }
        yield* breaker.record(providerModel, admission, breakerOutcomeOf(exit), startedAt)
        if (Exit.isSuccess(exit)) {
          // The successful call's row travels to PROJECT's transaction.
          return { result: exit.value, usage: yield* usageEntryOf(resolved, callNo, startedAt, exit, target) }
        }
        // A call that never left this machine (a refused connection) has no row: nothing was billed.
        if (
          !Option.exists(failure, (error) =>
            error._tag === "ProviderError" && error.sent === false)
        ) {
          yield* Effect.flatMap(usageEntryOf(resolved, callNo, startedAt, exit, target), recordUsage)
        }
        return yield* Effect.failCause(exit.cause)
      }).pipe(Effect.scoped)

    return yield* Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        // The route's targets in order until one answers; the failures of those that did not.
        const failures: Array<ExecutionError> = []
        for (const [index, target] of resolved.targets.entries()) {
          if (Duration.greaterThanOrEqualTo(spent, timeout)) break
          const last = index === resolved.targets.length - 1
          const providerModel = `${target.provider}/${target.model}`
          const admission = yield* breaker.admit(providerModel)
          if (admission._tag === "Skip") {
            const now = yield* Clock.currentTimeMillis
            failures.push(
              new ProviderError({
                code: "PROVIDER_UNAVAILABLE",
                message: `circuit open for ${providerModel}: not called`,
                retryAfterMs: Math.min(Math.max(0, admission.retryAt - now), maxRetryAfterMs),
                sent: false
              })
            )
            continue
          }
          const outcome = yield* Effect.either(call(target, admission, last, restore))
          if (outcome._tag === "Right") {
            const { result, usage } = outcome.right
            // Validated as it arrived: an answer that fails here has its row written now.
            const output = yield* resolved.registered.decodeOutput(result.json, resolved.content).pipe(
              Effect.tap((output) => (checkSafety
                ? safety.check({ stage: "output", jobType: job.jobType, content: output })
                : Effect.void)
              ),
              Effect.onError(() => recordUsage(usage))
            )
            const hash = outputHash(output)
            yield* Effect.logInfo("output validated").pipe(Effect.annotateLogs({ outputHash: hash }))
            return { ...resolved, output, outputHash: hash, usage } satisfies ExecutedJob
          }
          const error = boundedWait(outcome.left, maxRetryAfterMs)
          failures.push(error)
          if (!movesOn(error, target, route.maxWaitMs ?? 0)) break
          if (!last) {
            yield* Effect.logInfo("provider call failed; trying the route's next target").pipe(
              Effect.annotateLogs({
                provider: target.provider,
                model: target.model,
                errorCode: error.code,
                next: resolved.targets[index + 1]?.provider ?? ""
              })
            )
          }
        }
        return yield* Option.match(attemptError(failures, resolved), {
          onNone: () =>
            Effect.fail(
              new JobTimeoutError({ code: "TIMEOUT", message: `no answer within ${timeoutMs} ms`, timeoutMs })
            ),
          onSome: Effect.fail
        })
      })
    )
  },
  (effect, _resolved, attemptNo) => Effect.annotateLogs(effect, { stage: "EXECUTE", attempt: attemptNo }),
  timed(stageDuration, { stage: "execute" }),
  stageSpan("pipeline.execute")
)
