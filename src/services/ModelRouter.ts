import { Array as Arr, ConfigError, Duration, Effect, Option, Schema } from "effect"
import { ProviderConfig } from "../config/EngineConfig.js"
import { duplicateTopLevelKeys } from "../config/jsonObjectKeys.js"
import { ModelRouterSettings } from "../config/ModelRouterSettings.js"
import { ProviderName, ProviderSettings } from "../config/ProviderSettings.js"
import { type CredentialMode, userKeyProvider } from "../domain/CredentialMode.js"

export interface RouteTarget {
  readonly provider: string
  readonly model: string
}

/**
 * `fallbacks` are tried in order after the first target when a call fails provider-side;
 * `maxWaitMs` is how long a target may keep a call waiting before the next one is tried.
 */
export interface ModelRoute extends RouteTarget {
  readonly temperature: number
  readonly maxTokens: number | undefined
  readonly jsonMode: boolean
  readonly fallbacks?: Arr.NonEmptyReadonlyArray<RouteTarget>
  readonly maxWaitMs?: number
}

/** Every target of a route, the first one first. */
export const targetsOf = (route: ModelRoute): Arr.NonEmptyReadonlyArray<RouteTarget> => [
  { provider: route.provider, model: route.model },
  ...(route.fallbacks ?? [])
]

const Target = Schema.Struct({
  provider: ProviderName,
  model: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9._:@/-]{1,128}$/))
})

const RouteOverride = Schema.Struct({
  provider: Schema.optional(ProviderName),
  model: Schema.optional(Target.fields.model),
  temperature: Schema.optional(Schema.Number.pipe(Schema.between(0, 2))),
  maxTokens: Schema.optional(Schema.Int.pipe(Schema.positive())),
  fallbacks: Schema.optional(Schema.Array(Target).pipe(Schema.maxItems(8))),
  maxWaitMs: Schema.optional(Schema.Int.pipe(Schema.between(0, 600_000)))
})
type RouteOverride = typeof RouteOverride.Type

/**
 * `AI_MODEL_ROUTES`: JSON `{ "<jobType>" | "<jobType>:<credentialMode>" | "*:<credentialMode>": override }`.
 * The most specific key wins: `jobType:mode`, then `jobType`, then `*:mode`, then the defaults.
 */
export const RoutesJson = Schema.parseJson(Schema.Record({ key: Schema.String, value: RouteOverride }))
const decodeRoutes = Schema.decodeUnknownEither(RoutesJson, { onExcessProperty: "error" })

interface ModelRouterOptions {
  readonly defaults: ModelRoute
  readonly routes?: Readonly<Record<string, RouteOverride>>
  /** The wait a route with fallbacks allows a target when it does not say (`maxWaitMs`). */
  readonly fallbackMaxWait: Duration.Duration
}

const credentialModes: ReadonlyArray<CredentialMode> = ["platform_key", "user_deepseek_key"]

const makeModelRouter = (options: ModelRouterOptions) => {
  const routes = options.routes ?? {}
  const lookup = (key: string) => (Object.hasOwn(routes, key) ? routes[key] : undefined)
  const routeOf = (request: { readonly jobType: string; readonly credentialMode: CredentialMode }): ModelRoute => {
    const { credentialMode, jobType } = request
    const layers = [lookup(`*:${credentialMode}`), lookup(jobType), lookup(`${jobType}:${credentialMode}`)]
    const merged = layers.reduce<ModelRoute>(
      (route, override) => {
        if (override === undefined) return route
        const fallbacks = override.fallbacks ?? route.fallbacks
        const maxWaitMs = override.maxWaitMs ?? route.maxWaitMs
        return {
          provider: override.provider ?? route.provider,
          model: override.model ?? route.model,
          temperature: override.temperature ?? route.temperature,
          maxTokens: override.maxTokens ?? route.maxTokens,
          jsonMode: route.jsonMode,
          ...(fallbacks !== undefined && Arr.isNonEmptyReadonlyArray(fallbacks) ? { fallbacks } : {}),
          ...(maxWaitMs !== undefined ? { maxWaitMs } : {})
        }
      },
      options.defaults
    )
    if (merged.fallbacks === undefined) {
      const { maxWaitMs: _unused, ...single } = merged
      return single
    }
    return { ...merged, maxWaitMs: merged.maxWaitMs ?? Duration.toMillis(options.fallbackMaxWait) }
  }
  // Every target some route can reach: the defaults' and each override's, for each credential mode.
  const known = new Map<string, RouteTarget>()
  for (const key of ["*", ...Object.keys(routes)]) {
    const jobType = key.split(":")[0] ?? "*"
    for (const credentialMode of credentialModes) {
      for (const target of targetsOf(routeOf({ jobType, credentialMode }))) {
        known.set(`${target.provider}/${target.model}`, target)
      }
    }
  }
  const targets: ReadonlyArray<RouteTarget> = [...known.values()]
  return {
    route: (
      request: { readonly jobType: string; readonly credentialMode: CredentialMode }
    ): Effect.Effect<ModelRoute> => Effect.sync(() => routeOf(request)),
    /** Every provider and model a route names (operators' views of the breakers). */
    targets
  }
}

const routesInvalid = (message: string) => Effect.fail(ConfigError.InvalidData(["AI_MODEL_ROUTES"], message))

/** The routes, each provider they name checked against `AI_PROVIDERS`: start-up refuses a route to nowhere. */
const checkedRoutes = (raw: string, known: ReadonlySet<string>) =>
  Effect.gen(function*() {
    const duplicates = duplicateTopLevelKeys(raw)
    if (duplicates.length > 0) {
      return yield* routesInvalid(
        `AI_MODEL_ROUTES names ${duplicates.map((d) => JSON.stringify(d)).join(", ")} more than once`
      )
    }
    const routes = yield* decodeRoutes(raw).pipe(
      Effect.catchAll((error) => routesInvalid(`AI_MODEL_ROUTES is not valid: ${error.message}`))
    )
    for (const [key, override] of Object.entries(routes)) {
      const named = [override.provider, ...(override.fallbacks ?? []).map((target) => target.provider)]
      const unknown = named.find((provider) => provider !== undefined && !known.has(provider))
      if (unknown !== undefined) {
        return yield* routesInvalid(
          `AI_MODEL_ROUTES["${key}"] names provider "${unknown}", which is not configured (AI_PROVIDERS / AI_PROVIDER)`
        )
      }
      // A user's own key is never moved to a platform key: its routes name the user's provider only.
      const foreign = key.endsWith(":user_deepseek_key")
        ? named.find((provider) => provider !== undefined && provider !== userKeyProvider)
        : undefined
      if (foreign !== undefined) {
        return yield* routesInvalid(
          `AI_MODEL_ROUTES["${key}"] names provider "${foreign}": a user's own key is for ${userKeyProvider} only, so its fallbacks must be too`
        )
      }
    }
    return routes
  })

/**
 * Job type + credential mode → the provider and model, and the fallbacks, from configuration
 * (docs/architecture.md §8.2). Needs `ProviderConfig` (the default model).
 */
export class ModelRouter extends Effect.Service<ModelRouter>()("ai-job-engine/ModelRouter", {
  effect: Effect.gen(function*() {
    const provider = yield* ProviderConfig
    const providers = yield* ProviderSettings
    const config = yield* ModelRouterSettings
    const routes = Option.isSome(config.routes)
      ? yield* checkedRoutes(config.routes.value, new Set(providers.providers.keys()))
      : {}
    return makeModelRouter({
      defaults: {
        provider: providers.defaultProvider,
        model: provider.model,
        temperature: config.temperature,
        maxTokens: Option.getOrUndefined(config.maxTokens),
        jsonMode: true
      },
      routes,
      fallbackMaxWait: providers.fallbackMaxWait
    })
  }),
  dependencies: [ProviderSettings.layer, ModelRouterSettings.layer]
}) {}
