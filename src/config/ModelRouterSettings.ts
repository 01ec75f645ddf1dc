import { Config, Context, Layer, type Option } from "effect"

/**
 * The routes' call settings: `AI_TEMPERATURE` (default 0.7), `AI_MAX_TOKENS`, and `AI_MODEL_ROUTES`
 * as written (`ModelRouter` checks it against the configured providers).
 */
export class ModelRouterSettings extends Context.Tag("ai-job-engine/ModelRouterSettings")<
  ModelRouterSettings,
  {
    readonly temperature: number
    readonly maxTokens: Option.Option<number>
    readonly routes: Option.Option<string>
  }
>() {
  static readonly config = Config.all({
    temperature: Config.number("AI_TEMPERATURE").pipe(
      Config.withDefault(0.7),
      Config.validate({ message: "AI_TEMPERATURE must be between 0 and 2", validation: (t) => t >= 0 && t <= 2 })
    ),
    maxTokens: Config.option(
      Config.integer("AI_MAX_TOKENS").pipe(
        Config.validate({ message: "AI_MAX_TOKENS must be positive", validation: (n) => n > 0 })
      )
    ),
    routes: Config.option(Config.string("AI_MODEL_ROUTES"))
  })
  static readonly layer = Layer.effect(ModelRouterSettings, ModelRouterSettings.config)
}
