import { Clock, Effect, Exit, Layer } from "effect"
import { AiCostCalculator } from "./AiCostCalculator.js"
import { AiGateway, type GenerateRequest } from "./AiGateway.js"
import { increment, observe, providerCallDuration, providerCost, providerTokens } from "./EngineMetrics.js"

/**
 * Every provider call as one span, `provider.chat`, a child of the stage that makes it, with the
 * OpenTelemetry GenAI attributes (system, models, token counts, finish reason, error type) and
 * the job's ids; never the messages, the answer or the key. The same call feeds the provider
 * metrics: latency by outcome, tokens by direction, cost. Wraps any `AiGateway`, real or synthetic.
 */

const outcomeOf = (exit: Exit.Exit<unknown, { readonly code: string }>) =>
  Exit.match(exit, {
    onSuccess: () => "ok",
    onFailure: (cause) => {
      const failure = cause._tag === "Fail" ? cause.error : undefined
      return failure !== undefined ? failure.code : cause._tag === "Interrupt" ? "CANCELLED" : "INTERNAL_ERROR"
    }
  })

export const instrumentGateway = (gateway: AiGateway["Type"], costs: AiCostCalculator): AiGateway["Type"] =>
  AiGateway.of({
    ...(gateway.settle === undefined ? {} : { settle: gateway.settle }),
    generate: (request: GenerateRequest) =>
      Effect.gen(function*() {
        const started = yield* Clock.currentTimeMillis
        const exit = yield* Effect.exit(gateway.generate(request))
        const seconds = ((yield* Clock.currentTimeMillis) - started) / 1000
        const outcome = outcomeOf(exit)
        yield* observe(providerCallDuration, { provider: request.provider, model: request.model, outcome }, seconds)
        if (Exit.isSuccess(exit)) {
          const { usage } = exit.value
          const labels = { provider: request.provider, model: request.model }
          yield* increment(providerTokens, { ...labels, direction: "input" }, usage.promptTokens)
          yield* increment(providerTokens, { ...labels, direction: "output" }, usage.completionTokens)
          yield* increment(providerCost, labels, yield* costs.costMicros(request.model, usage))
          yield* Effect.annotateCurrentSpan({
            "gen_ai.response.model": exit.value.model,
            "ai_job.usage_estimated": exit.value.usageEstimated === true,
            "gen_ai.usage.input_tokens": usage.promptTokens,
            "gen_ai.usage.output_tokens": usage.completionTokens,
            "gen_ai.response.finish_reasons": [exit.value.finishReason]
          })
        } else {
          yield* Effect.annotateCurrentSpan({ "error.type": outcome })
        }
        return yield* exit
      }).pipe(
        Effect.withSpan("provider.chat", {
          kind: "client",
          captureStackTrace: false,
          attributes: {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": request.provider,
            "gen_ai.request.model": request.model,
            ...(request.temperature !== undefined ? { "gen_ai.request.temperature": request.temperature } : {}),
            ...(request.maxTokens !== undefined ? { "gen_ai.request.max_tokens": request.maxTokens } : {}),
            "ai_job.id": request.job.id,
            "ai_job.type": request.job.type,
            "ai_job.call_no": request.job.attemptNo,
            "ai_job.credential_mode": request.credential.mode
          }
        })
      )
  })

/** `AiGateway` instrumented: provide the real or synthetic gateway (and the cost calculator) below it. */
export const AiGatewayTelemetryLive = Layer.effect(
  AiGateway,
  Effect.map(Effect.all([AiGateway, AiCostCalculator]), ([gateway, costs]) => instrumentGateway(gateway, costs))
)
