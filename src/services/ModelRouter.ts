import { Config, Effect, Option, Schema } from "effect"
import { ProviderConfig } from "../config/EngineConfig.js"
import type { CredentialMode } from "../domain/CredentialMode.js"

/** Which provider and model serve a call, and with which sampling settings. */
export interface ModelRoute {
  readonly provider: string
  readonly model: string
  readonly temperature: number
  readonly maxTokens: number | undefined
  readonly jsonMode: boolean
}

const RouteOverride = Schema.Struct({
  provider: Schema.optional(Schema.String),
  model: Schema.optional(Schema.String),
  temperature: Schema.optional(Schema.Number.pipe(Schema.between(0, 2))),
  maxTokens: Schema.optional(Schema.Int.pipe(Schema.positive()))
})
type RouteOverride = typeof RouteOverride.Type

/**
 * `AI_MODEL_ROUTES`: JSON `{ "<jobType>" | "<jobType>:<credentialMode>" | "*:<credentialMode>": override }`.
 * The most specific key wins: `jobType:mode`, then `jobType`, then `*:mode`, then the defaults.
 */
export const RoutesJson = Schema.parseJson(Schema.Record({ key: Schema.String, value: RouteOverride }))

interface ModelRouterOptions {
  readonly defaults: ModelRoute
  readonly routes?: Readonly<Record<string, RouteOverride>>
}

const makeModelRouter = (options: ModelRouterOptions) => {
  const routes = options.routes ?? {}
  const lookup = (key: string) => (Object.hasOwn(routes, key) ? routes[key] : undefined)
  return {
    route: (request: { readonly jobType: string; readonly credentialMode: CredentialMode }): Effect.Effect<ModelRoute> =>
      Effect.sync(() => {
        const { credentialMode, jobType } = request
        const layers = [lookup(`*:${credentialMode}`), lookup(jobType), lookup(`${jobType}:${credentialMode}`)]
        return layers.reduce<ModelRoute>(
          (route, override) =>
            override === undefined
              ? route
              : {
                provider: override.provider ?? route.provider,
                model: override.model ?? route.model,
                temperature: override.temperature ?? route.temperature,
                maxTokens: override.maxTokens ?? route.maxTokens,
                jsonMode: route.jsonMode
              },
          options.defaults
        )
      })
  }
}

/** `AI_PROVIDER` (default deepseek), `AI_MODEL`, `AI_TEMPERATURE` (default 0.7), `AI_MAX_TOKENS`, `AI_MODEL_ROUTES`. */
export const modelRouterConfig = Config.all({
  provider: Config.string("AI_PROVIDER").pipe(Config.withDefault("deepseek")),
  temperature: Config.number("AI_TEMPERATURE").pipe(
    Config.withDefault(0.7),
    Config.validate({ message: "AI_TEMPERATURE must be between 0 and 2", validation: (t) => t >= 0 && t <= 2 })
  ),
  maxTokens: Config.option(
    Config.integer("AI_MAX_TOKENS").pipe(Config.validate({ message: "AI_MAX_TOKENS must be positive", validation: (n) => n > 0 }))
  ),
  routes: Config.option(Schema.Config("AI_MODEL_ROUTES", RoutesJson))
})

/**
 * Job type + credential mode → provider and model, from configuration (docs/architecture.md
 * §8.2). Needs `ProviderConfig` (the default model).
 */
export class ModelRouter extends Effect.Service<ModelRouter>()("ai-job-engine/ModelRouter", {
  effect: Effect.gen(function* () {
    const provider = yield* ProviderConfig
    const config = yield* modelRouterConfig
    return makeModelRouter({
      defaults: {
        provider: config.provider,
        model: provider.model,
        temperature: config.temperature,
        maxTokens: Option.getOrUndefined(config.maxTokens),
        jsonMode: true
      },
      routes: Option.getOrElse(config.routes, () => ({}))
    })
  })
}) {}
