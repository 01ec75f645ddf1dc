import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Layer, Option } from "effect"
import { TimingConfig } from "../../src/config/EngineConfig.js"
import {
  domainEventsQueueConfig,
  EventDeliverySettings,
  type EventDeliverySettingsShape,
  webhookEndpointsConfig
} from "../../src/config/EventDeliverySettings.js"
import { newWebhookSecret } from "../support/webhookReceiver.js"

const withEnv = (env: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

const settingsWith = (env: Record<string, string>, outboxLockTtlMs: number) =>
  EventDeliverySettings.pipe(
    Effect.provide(
      EventDeliverySettings.layer.pipe(
        Layer.provide(TimingConfig.make({ outboxLockTtl: Duration.millis(outboxLockTtlMs) }))
      )
    ),
    withEnv(env)
  )

describe("webhook and event delivery configuration", () => {
  it.effect("WEBHOOK_URL takes one or more endpoints, each signed with every WEBHOOK_SECRET of a rotation", () =>
    Effect.gen(function*() {
      expect(yield* webhookEndpointsConfig.pipe(withEnv({}))).toEqual([])
      const endpoints = yield* webhookEndpointsConfig.pipe(
        withEnv({
          WEBHOOK_URL: "https://a.example/hooks, http://127.0.0.1:8080/in",
          WEBHOOK_SECRET: `${newWebhookSecret()} ${newWebhookSecret()}`
        })
      )
      expect(endpoints.map((endpoint) => endpoint.url.href)).toEqual([
        "https://a.example/hooks",
        "http://127.0.0.1:8080/in"
      ])
      expect(endpoints.map((endpoint) => endpoint.keys.length)).toEqual([2, 2])
    }))

  it.effect("an endpoint without a valid secret, or a URL that is not http(s), stops the start naming the variable, not the value", () =>
    Effect.gen(function*() {
      const refused = (env: Record<string, string>) =>
        Effect.flip(webhookEndpointsConfig.pipe(withEnv(env))).pipe(Effect.map(String))
      expect(yield* refused({ WEBHOOK_URL: "https://a.example/hooks" })).toContain("WEBHOOK_SECRET must be set")
      expect(yield* refused({ WEBHOOK_URL: "https://a.example/hooks", WEBHOOK_SECRET: "whsec_c2hvcnQ=" })).toContain(
        "WEBHOOK_SECRET"
      )
      expect(yield* refused({ WEBHOOK_URL: "https://a.example/hooks", WEBHOOK_SECRET: "not-a-whsec-secret" }))
        .toContain("WEBHOOK_SECRET")
      const badUrl = yield* refused({
        WEBHOOK_URL: "https://a.example/ ftp://b.example/?token=s3cret",
        WEBHOOK_SECRET: newWebhookSecret()
      })
      expect(badUrl).toContain("endpoint 2 is not an http(s) URL")
      expect(badUrl).not.toContain("s3cret")
    }))

  it.effect("the delivery timeout stays inside the dispatcher's claim: derived when unset, refused when set too long", () =>
    Effect.gen(function*() {
      const deliveryTimeoutMs = (settings: EventDeliverySettingsShape) => Duration.toMillis(settings.deliveryTimeout)
      expect(deliveryTimeoutMs(yield* settingsWith({}, 15_000))).toBe(7_500)
      expect(deliveryTimeoutMs(yield* settingsWith({}, 60_000))).toBe(10_000)
      expect(deliveryTimeoutMs(yield* settingsWith({ WEBHOOK_TIMEOUT_MS: "4000" }, 5_000))).toBe(4_000)
      const refused = yield* Effect.flip(settingsWith({ WEBHOOK_TIMEOUT_MS: "5000" }, 5_000))
      expect(String(refused)).toContain("must be shorter than OUTBOX_LOCK_TTL_MS")
    }))

  it.effect("DOMAIN_EVENTS_QUEUE names a BullMQ queue, under the engine's prefix unless DOMAIN_EVENTS_PREFIX says otherwise", () =>
    Effect.gen(function*() {
      expect(yield* domainEventsQueueConfig.pipe(withEnv({}))).toEqual(Option.none())
      expect(
        yield* domainEventsQueueConfig.pipe(
          withEnv({ DOMAIN_EVENTS_QUEUE: "domain-events", DOMAIN_EVENTS_PREFIX: "bull" })
        )
      ).toEqual(
        Option.some({ queueName: "domain-events", prefix: Option.some("bull") })
      )
      expect(String(yield* Effect.flip(domainEventsQueueConfig.pipe(withEnv({ DOMAIN_EVENTS_QUEUE: "a:b" })))))
        .toContain("DOMAIN_EVENTS_QUEUE")
    }))
})
