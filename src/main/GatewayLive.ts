import { Config, Effect, Layer, Option } from "effect"
import { ProviderConfig } from "../config/EngineConfig.js"
import { AiCostCalculatorLive } from "../services/AiCostCalculatorLive.js"
import { BuiltinPromptTemplatesLive } from "../jobs/builtinPrompts.js"
import { CredentialVaultLive } from "../services/CredentialVaultLive.js"
import { ModelRouterLive } from "../services/ModelRouterLive.js"
import { OpenAiCompatibleGatewayLive } from "../layers/gateway/OpenAiCompatibleGateway.js"
import { RuleBasedContentSafetyLive } from "../services/RuleBasedContentSafety.js"
import { SyntheticGatewayLive } from "../layers/gateway/SyntheticGateway.js"

/**
 * `AI_GATEWAY`: `openai` (the OpenAI-compatible provider at `AI_BASE_URL`) or `synthetic`.
 * Unset: `openai` when `AI_API_KEY` is set, otherwise `synthetic` (the embedded default).
 */
export const gatewayKindConfig = Config.literal("openai", "synthetic")("AI_GATEWAY").pipe(Config.option)

export const AiGatewayFromConfig = Layer.unwrapEffect(
  Effect.gen(function* () {
    const kind = yield* gatewayKindConfig
    const provider = yield* ProviderConfig
    const chosen = Option.getOrElse(kind, () => (Option.isSome(provider.apiKey) ? "openai" as const : "synthetic" as const))
    yield* Effect.logInfo("AI gateway selected").pipe(Effect.annotateLogs({ gateway: chosen }))
    return chosen === "openai" ? OpenAiCompatibleGatewayLive : SyntheticGatewayLive
  })
)

/**
 * Everything RESOLVE and EXECUTE need besides the gateway itself: ModelRouter, CredentialVault
 * (needs a `CredentialRepository`), ContentSafety, AiCostCalculator and the built-in PromptTemplates.
 * Needs `ProviderConfig`.
 */
export const GatewayServicesLive = Layer.mergeAll(
  ModelRouterLive,
  CredentialVaultLive,
  RuleBasedContentSafetyLive,
  AiCostCalculatorLive,
  BuiltinPromptTemplatesLive
)
