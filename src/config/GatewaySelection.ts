import { Config, Context, Layer, type Option } from "effect"

/**
 * `AI_GATEWAY`: `openai` (the OpenAI-compatible providers of `AI_PROVIDERS` / `AI_BASE_URL`) or
 * `synthetic`. Unset: `openai` when a provider has a key, otherwise `synthetic` (the embedded default).
 */
export class GatewaySelection extends Context.Tag("ai-job-engine/GatewaySelection")<
  GatewaySelection,
  { readonly kind: Option.Option<"openai" | "synthetic"> }
>() {
  static readonly config = Config.all({ kind: Config.literal("openai", "synthetic")("AI_GATEWAY").pipe(Config.option) })
  static readonly layer = Layer.effect(GatewaySelection, GatewaySelection.config)
}
