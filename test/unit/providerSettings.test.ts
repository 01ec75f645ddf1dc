import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Either, Option, Redacted } from "effect"
import { ProviderConfig } from "../../src/config/EngineConfig.js"
import { ProviderLimitsConfig } from "../../src/config/ProviderLimitsConfig.js"
import { ProviderSettings } from "../../src/config/ProviderSettings.js"
import { ModelRouter } from "../../src/services/ModelRouter.js"

const withEnv = (env: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

/** The providers as start-up reads them, with `ProviderConfig` (the single provider) from the same environment. */
const load = Effect.provideServiceEffect(ProviderSettings.load, ProviderConfig, ProviderConfig.config)

/** A setting's milliseconds, as its variable gives them. */
const millisOf = (duration: Duration.Duration | undefined) =>
  duration === undefined ? undefined : Duration.toMillis(duration)

/** The message a refused start-up shows, or "ok". */
const refusal = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.either(effect), Either.match({ onLeft: String, onRight: () => "ok" }))

const twoProviders = {
  AI_PROVIDERS: JSON.stringify({
    deepseek: { baseUrl: "https://api.deepseek.com", apiKeyEnv: "DEEPSEEK_KEY", requestTimeoutMs: 30_000 },
    openrouter: {
      baseUrl: "https://openrouter.ai/api/v1",
      apiKeyEnv: "OPENROUTER_KEY",
      headers: { "HTTP-Referer": "https://app.example" },
      structuredOutputs: true
    }
  }),
  DEEPSEEK_KEY: "sk-deepseek-canary",
  OPENROUTER_KEY: "sk-openrouter-canary"
}

describe("AI providers from configuration", () => {
  it.effect("without AI_PROVIDERS, AI_PROVIDER / AI_BASE_URL / AI_API_KEY / AI_REQUEST_TIMEOUT_MS are a set of one", () =>
    Effect.gen(function*() {
      const settings = yield* load.pipe(
        withEnv({ AI_BASE_URL: "https://llm.internal/v1", AI_API_KEY: "sk-one", AI_REQUEST_TIMEOUT_MS: "20000" })
      )
      expect([...settings.providers.keys()]).toStrictEqual(["deepseek"])
      const only = settings.providers.get("deepseek")
      expect([only?.baseUrl, millisOf(only?.requestTimeout), Option.map(only?.apiKey ?? Option.none(), Redacted.value)])
        .toStrictEqual([
          "https://llm.internal/v1",
          20_000,
          Option.some("sk-one")
        ])
      expect([settings.defaultProvider, millisOf(settings.maxRetryAfter), settings.maxResponseBytes]).toStrictEqual([
        "deepseek",
        60_000,
        4 * 1024 * 1024
      ])
    }))

  it.effect("AI_PROVIDERS: each provider its own URL, key (from the variable it names, redacted), timeout, headers", () =>
    Effect.gen(function*() {
      const settings = yield* load.pipe(withEnv(twoProviders))
      expect([...settings.providers.keys()]).toStrictEqual(["deepseek", "openrouter"])
      const router = settings.providers.get("openrouter")
      expect(router).toMatchObject({
        baseUrl: "https://openrouter.ai/api/v1",
        requestTimeout: Duration.millis(60_000),
        structuredOutputs: true,
        headers: { "HTTP-Referer": "https://app.example" }
      })
      expect(millisOf(settings.providers.get("deepseek")?.requestTimeout)).toBe(30_000)
      expect(String(router?.apiKey)).not.toContain("canary")
      expect(Option.map(router?.apiKey ?? Option.none(), Redacted.value)).toStrictEqual(
        Option.some("sk-openrouter-canary")
      )
    }))

  it.effect("start-up refuses, naming the variable: a missing key variable, a bad URL, an unknown default, a provider twice, both styles at once", () =>
    Effect.gen(function*() {
      const providers = (value: unknown) => JSON.stringify(value)
      const cases: ReadonlyArray<readonly [Record<string, string>, string]> = [
        [{ ...twoProviders, OPENROUTER_KEY: "" }, "OPENROUTER_KEY"],
        [{ AI_PROVIDERS: providers({ a: { baseUrl: "https://a.example", apiKeyEnv: "A_KEY" } }) }, "A_KEY"],
        [
          { AI_PROVIDERS: providers({ a: { baseUrl: "ftp://a.example", apiKeyEnv: "A_KEY" } }), A_KEY: "k" },
          "AI_PROVIDERS"
        ],
        [
          { AI_PROVIDERS: providers({ a: { baseUrl: "https://user:pw@a.example", apiKeyEnv: "A_KEY" } }), A_KEY: "k" },
          "AI_PROVIDERS"
        ],
        [{
          AI_PROVIDERS: providers({
            a: { baseUrl: "https://a.example", apiKeyEnv: "A_KEY", headers: { Authorization: "x" } }
          }),
          A_KEY: "k"
        }, "AI_PROVIDERS"],
        [
          { AI_PROVIDERS: providers({ a: { baseUrl: "https://a.example", apiKeyEnv: "A_KEY", typo: 1 } }), A_KEY: "k" },
          "AI_PROVIDERS"
        ],
        [{
          AI_PROVIDERS:
            `{"a":{"baseUrl":"https://a.example","apiKeyEnv":"A_KEY"},"a":{"baseUrl":"https://b.example","apiKeyEnv":"A_KEY"}}`,
          A_KEY: "k",
          AI_PROVIDER: "a"
        }, "more than once"],
        [{ ...twoProviders, AI_PROVIDER: "openai" }, "AI_PROVIDER"],
        [{ ...twoProviders, AI_BASE_URL: "https://api.deepseek.com" }, "AI_BASE_URL"],
        [{ AI_BASE_URL: "not a url" }, "AI_BASE_URL"]
      ]
      for (const [env, named] of cases) {
        const message = yield* refusal(load.pipe(withEnv(env)))
        expect([named, message.includes(named)]).toStrictEqual([named, true])
        // A refusal never shows a key.
        expect(message).not.toContain("sk-")
      }
    }))

  it.effect("routes with fallbacks; start-up refuses a route to a provider that is not configured", () =>
    Effect.gen(function*() {
      const routes = {
        "*:platform_key": {
          fallbacks: [{ provider: "openrouter", model: "deepseek/deepseek-chat" }],
          maxWaitMs: 1_500
        },
        flashcard_generation: { model: "deepseek-reasoner" }
      }
      const router = yield* Effect.provide(ModelRouter, ModelRouter.Default).pipe(
        withEnv({ ...twoProviders, AI_MODEL_ROUTES: JSON.stringify(routes) }),
        Effect.provideServiceEffect(ProviderConfig, ProviderConfig.config.pipe(withEnv({})))
      )
      expect(yield* router.route({ jobType: "flashcard_generation", credentialMode: "platform_key" })).toStrictEqual({
        provider: "deepseek",
        model: "deepseek-reasoner",
        temperature: 0.7,
        maxTokens: undefined,
        jsonMode: true,
        fallbacks: [{ provider: "openrouter", model: "deepseek/deepseek-chat" }],
        maxWaitMs: 1_500
      })
      // The user's own key gets no fallback the platform route names.
      expect((yield* router.route({ jobType: "flashcard_generation", credentialMode: "user_deepseek_key" })).fallbacks)
        .toBeUndefined()

      const unknown = { "*:platform_key": { fallbacks: [{ provider: "anthropic", model: "claude" }] } }
      const refused = yield* refusal(
        Effect.provide(ModelRouter, ModelRouter.Default).pipe(
          withEnv({ ...twoProviders, AI_MODEL_ROUTES: JSON.stringify(unknown) }),
          Effect.provideServiceEffect(ProviderConfig, ProviderConfig.config.pipe(withEnv({})))
        )
      )
      expect(refused).toContain("AI_MODEL_ROUTES")
      expect(refused).toContain("anthropic")

      // A user-key route may name user-key fallbacks only: never a provider the user's key is not for.
      const userKeyElsewhere = {
        "*:user_deepseek_key": { fallbacks: [{ provider: "openrouter", model: "deepseek/deepseek-chat" }] }
      }
      const crossing = yield* refusal(
        Effect.provide(ModelRouter, ModelRouter.Default).pipe(
          withEnv({ ...twoProviders, AI_MODEL_ROUTES: JSON.stringify(userKeyElsewhere) }),
          Effect.provideServiceEffect(ProviderConfig, ProviderConfig.config.pipe(withEnv({})))
        )
      )
      expect(crossing).toContain("user_deepseek_key")
      expect(crossing).toContain("openrouter")
    }))

  it.effect("AI_RATE_LIMITS and AI_MODEL_ROUTES refuse a key written twice (JSON would keep only the last)", () =>
    Effect.gen(function*() {
      const limits = yield* refusal(ProviderLimitsConfig.config.pipe(withEnv({
        AI_RATE_LIMITS: `{"deepseek/deepseek-chat":{"rpm":60},"deepseek/deepseek-chat":{"rpm":6000}}`
      })))
      expect(limits).toContain("deepseek/deepseek-chat")
      expect(limits).toContain("more than once")
    }))
})
