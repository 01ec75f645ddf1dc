import { Config, ConfigError, Context, Duration, Effect, Either, Layer, Option, Redacted } from "effect"
import { optionalMillisDuration, positiveMillisDuration, positiveWhole } from "./configValues.js"
import { TimingConfig } from "./EngineConfig.js"

/**
 * The notify lane (docs/architecture.md §6.8): how a dispatcher delivers jobs' terminal events
 * to their targets, apart from the enqueue lane.
 */
export interface EventDeliverySettingsShape {
  /** Events in delivery at once per dispatcher process (each to all its targets in parallel). */
  readonly concurrency: number
  /** `WEBHOOK_TIMEOUT_MS`: one delivery to one target that takes longer fails (and is retried); below the claim TTL. */
  readonly deliveryTimeout: Duration.Duration
  /** `EVENT_RETRY_BASE_MS`: first retry delay; doubles per failed round (jittered), capped at `retryMaxDelay`. */
  readonly retryBaseDelay: Duration.Duration
  /** `EVENT_RETRY_MAX_MS`. */
  readonly retryMaxDelay: Duration.Duration
  /** `EVENT_RETRY_FOR_MS`: retries go on while the schedule's delays add up to no more than this; then the event is `dead`. */
  readonly retryFor: Duration.Duration
}

const defaults: EventDeliverySettingsShape = {
  concurrency: 8,
  deliveryTimeout: Duration.seconds(10),
  retryBaseDelay: Duration.seconds(5),
  retryMaxDelay: Duration.hours(1),
  retryFor: Duration.days(3)
}

export class EventDeliverySettings extends Context.Tag("ai-job-engine/EventDeliverySettings")<
  EventDeliverySettings,
  EventDeliverySettingsShape
>() {
  static readonly config = Config.all({
    concurrency: positiveWhole("EVENT_DELIVERY_CONCURRENCY", defaults.concurrency),
    deliveryTimeout: optionalMillisDuration("WEBHOOK_TIMEOUT_MS"),
    retryBaseDelay: positiveMillisDuration("EVENT_RETRY_BASE_MS", defaults.retryBaseDelay),
    retryMaxDelay: positiveMillisDuration("EVENT_RETRY_MAX_MS", defaults.retryMaxDelay),
    retryFor: positiveMillisDuration("EVENT_RETRY_FOR_MS", defaults.retryFor)
  })

  /**
   * A delivery must end within the dispatcher's claim (`OUTBOX_LOCK_TTL_MS`),
   * or another dispatcher would take the event over while it is still in flight: unset,
   * `WEBHOOK_TIMEOUT_MS` is 10 s or half the claim, whichever is shorter; set, it must be shorter
   * than the claim.
   */
  static readonly layer = Layer.effect(
    EventDeliverySettings,
    Effect.gen(function*() {
      const { deliveryTimeout, ...settings } = yield* EventDeliverySettings.config
      const claimMs = Duration.toMillis((yield* TimingConfig).outboxLockTtl)
      if (Option.isNone(deliveryTimeout)) {
        const defaultMs = Duration.toMillis(defaults.deliveryTimeout)
        return {
          ...settings,
          deliveryTimeout: Duration.millis(Math.max(1, Math.min(defaultMs, Math.floor(claimMs / 2))))
        }
      }
      const deliveryTimeoutMs = Duration.toMillis(deliveryTimeout.value)
      if (deliveryTimeoutMs >= claimMs) {
        return yield* Effect.fail(ConfigError.InvalidData(
          ["WEBHOOK_TIMEOUT_MS"],
          `WEBHOOK_TIMEOUT_MS (${deliveryTimeoutMs}) must be shorter than OUTBOX_LOCK_TTL_MS (${claimMs}), the dispatcher's claim on an event`
        ))
      }
      return { ...settings, deliveryTimeout: deliveryTimeout.value }
    })
  )

  static readonly defaults = defaults
  static readonly make = (overrides: Partial<EventDeliverySettingsShape> = {}) =>
    Layer.succeed(EventDeliverySettings, { ...defaults, ...overrides })
}

/** One webhook endpoint: where to POST, and the secrets to sign with (the first is current). */
export interface WebhookEndpoint {
  readonly url: URL
  /** The HMAC keys, decoded from `whsec_…`; each signs, so a receiver may verify with any. */
  readonly keys: ReadonlyArray<Redacted.Redacted<Uint8Array>>
}

const whsecPrefix = "whsec_"

/** `whsec_` + base64 of 24 to 64 random bytes (Standard Webhooks' symmetric secret); undefined when not one. */
export const decodeWebhookSecret = (secret: string): Uint8Array | undefined => {
  if (!secret.startsWith(whsecPrefix)) return undefined
  const encoded = secret.slice(whsecPrefix.length)
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) return undefined
  const key = Buffer.from(encoded, "base64")
  return key.length >= 24 && key.length <= 64 ? new Uint8Array(key) : undefined
}

const isHttpUrl = (value: string) => {
  try {
    const url = new URL(value)
    return (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== ""
  } catch {
    return false
  }
}

const words = (value: string) => value.split(/[\s,]+/).filter((word) => word.length > 0)

/**
 * `WEBHOOK_URL`: one or more endpoints (separated by spaces or commas), each signed with
 * `WEBHOOK_SECRET` (`whsec_…`; several, separated by spaces, while rotating: the first is the
 * new one, every one signs). Unset: no webhooks. An endpoint without a secret is refused at start.
 */
export const webhookEndpointsConfig: Config.Config<ReadonlyArray<WebhookEndpoint>> = Config.all({
  urls: Config.string("WEBHOOK_URL").pipe(Config.withDefault("")),
  secrets: Config.option(Config.redacted("WEBHOOK_SECRET"))
}).pipe(
  Config.mapOrFail(({ secrets, urls }) => {
    const endpoints = words(urls)
    if (endpoints.length === 0) return Either.right([])
    const invalid = endpoints.findIndex((url) => !isHttpUrl(url))
    if (invalid >= 0) {
      // The position only: a URL may carry a token in its query.
      return Either.left(
        ConfigError.InvalidData(["WEBHOOK_URL"], `WEBHOOK_URL: endpoint ${invalid + 1} is not an http(s) URL`)
      )
    }
    const keys = Option.match(secrets, { onNone: () => [], onSome: (secret) => words(Redacted.value(secret)) }).map(
      decodeWebhookSecret
    )
    if (keys.length === 0 || keys.some((key) => key === undefined)) {
      return Either.left(ConfigError.InvalidData(
        ["WEBHOOK_SECRET"],
        "WEBHOOK_SECRET must be set with WEBHOOK_URL: whsec_ followed by the base64 of 24 to 64 random bytes (several separated by spaces while rotating)"
      ))
    }
    const redacted = keys.flatMap((key) => (key === undefined ? [] : [Redacted.make(key)]))
    return Either.right(endpoints.map((url) => ({ url: new URL(url), keys: redacted })))
  })
)

/** The domain-events queue: its name and the BullMQ prefix its consumers use. */
export interface DomainEventsQueue {
  readonly queueName: string
  /** None: the engine's own (`{REDIS_KEY_PREFIX}:bull`). */
  readonly prefix: Option.Option<string>
}

const bullName = /^[A-Za-z0-9._-]{1,100}$/

/**
 * `DOMAIN_EVENTS_QUEUE`: a BullMQ queue that receives every terminal event as well (queue job id
 * = event id). `DOMAIN_EVENTS_PREFIX`: the BullMQ prefix of its consumers, when not the engine's.
 */
export const domainEventsQueueConfig: Config.Config<Option.Option<DomainEventsQueue>> = Config.all({
  queueName: Config.option(
    Config.string("DOMAIN_EVENTS_QUEUE").pipe(
      Config.validate({
        message: "DOMAIN_EVENTS_QUEUE must be 1-100 letters, digits, '.', '_' or '-'",
        validation: (name) => bullName.test(name)
      })
    )
  ),
  prefix: Config.option(
    Config.string("DOMAIN_EVENTS_PREFIX").pipe(
      Config.validate({
        message: "DOMAIN_EVENTS_PREFIX must be 1-100 letters, digits, ':', '.', '_' or '-'",
        validation: (prefix) => /^[A-Za-z0-9:._-]{1,100}$/.test(prefix)
      })
    )
  )
}).pipe(Config.map(({ prefix, queueName }) => Option.map(queueName, (name) => ({ queueName: name, prefix }))))
