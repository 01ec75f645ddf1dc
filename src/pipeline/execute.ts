import { Clock, Effect, Exit } from "effect"
import { outputHash } from "../domain/CanonicalJson.js"
import { JobTimeoutError } from "../domain/ExecutionError.js"
import { AiGateway } from "../services/AiGateway.js"
import { ContentSafety } from "../services/ContentSafety.js"
import { PromptTemplates } from "../services/PromptTemplates.js"
import { recordUsage, usageEntryOf } from "./complete.js"
import type { ExecutedJob, ResolvedJob } from "./RunningJob.js"
import { stageDuration, timed } from "../services/EngineMetrics.js"

/**
 * EXECUTE (docs/architecture.md §8.3), one attempt: the input safety check, the prompt (with the
 * problems of the previous attempt's answer, if any), the provider call under the definition's
 * timeout (the timeout interrupts the call, which aborts its HTTP request), then the output's
 * validation, safety check and hash. Each call's usage row is COMPLETE's: one that ends here is
 * written as it ends; the successful one travels to PROJECT.
 */
export const execute = Effect.fn("pipeline.execute")(
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

    const startedAt = yield* Clock.currentTimeMillis
    const timeoutMs = definition.execution.timeoutMs
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
      Effect.onExit((exit) =>
        Exit.isSuccess(exit) ? Effect.void : Effect.flatMap(usageEntryOf(resolved, attemptNo, startedAt, exit), recordUsage)
      )
    )
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
