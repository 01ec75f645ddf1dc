import { HttpClient, HttpClientRequest } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { Clock, Effect, Redacted } from "effect"
import { createHash, createHmac } from "node:crypto"
import { type WebhookEndpoint, webhookEndpointsConfig } from "../../config/EventDeliverySettings.js"
import { type EventDelivery, EventDeliveryFailed, type EventTarget } from "../../services/outbox/EventTargets.js"
import { pauseUntilFromHeaders } from "../rateLimitHeaders.js"

/**
 * The `webhook-signature` header of Standard Webhooks: `v1,` and the base64 HMAC-SHA256 of
 * `{webhook-id}.{webhook-timestamp}.{body}` under each key, separated by spaces (several while a
 * secret is rotated, so a receiver holding either verifies).
 */
export const standardWebhookSignature = (
  keys: ReadonlyArray<Redacted.Redacted<Uint8Array>>,
  webhookId: string,
  timestampSeconds: number,
  body: string
): string =>
  keys
    .map((key) =>
      `v1,${
        createHmac("sha256", Redacted.value(key)).update(`${webhookId}.${timestampSeconds}.${body}`).digest("base64")
      }`
    )
    .join(" ")

/** How logs name an endpoint: origin and path, never its query (it may carry a token) or credentials. */
export const endpointLabel = (url: URL) => `webhook ${url.origin}${url.pathname}`

/** The endpoint's key in `delivered_to`: a hash of its whole URL, stable whatever order the list is in. */
export const endpointKey = (url: URL) => `webhook:${createHash("sha256").update(url.href).digest("hex").slice(0, 16)}`

const isSuccess = (status: number) => status >= 200 && status < 300

/**
 * One endpoint as an `EventTarget` (docs/architecture.md §6.8): a POST of the event's JSON with
 * the Standard Webhooks headers, `webhook-id` the event id (the same on every retry, so a
 * receiver dedupes on it) and a `webhook-timestamp` of this attempt. A 2xx answer acknowledges
 * it; anything else (a redirect included: it is not followed) fails with the status only. The
 * answer's body is never read: the request ends once its status is known. The lane bounds each
 * delivery with its timeout; its interruption aborts the request.
 */
export const makeStandardWebhookTarget = (endpoint: WebhookEndpoint) =>
  Effect.gen(function*() {
    // No client span and no trace headers: the span would record the URL's query, and a
    // receiver has no use for the engine's trace ids. The lane traces each delivery itself.
    const client = (yield* HttpClient.HttpClient).pipe(
      HttpClient.withTracerDisabledWhen(() => true),
      HttpClient.withTracerPropagation(false),
      HttpClient.withScope
    )
    const label = endpointLabel(endpoint.url)

    const deliver = (delivery: EventDelivery) =>
      Effect.gen(function*() {
        const body = JSON.stringify(delivery.body)
        const now = yield* Clock.currentTimeMillis
        const timestamp = Math.floor(now / 1000)
        const request = HttpClientRequest.post(endpoint.url).pipe(
          HttpClientRequest.setHeaders({
            "webhook-id": delivery.eventId,
            "webhook-timestamp": String(timestamp),
            "webhook-signature": standardWebhookSignature(endpoint.keys, delivery.eventId, timestamp, body),
            "user-agent": "ai-job-engine-webhooks"
          }),
          HttpClientRequest.bodyText(body, "application/json")
        )
        const answer = yield* client.execute(request).pipe(
          Effect.map((response) => ({ status: response.status, headers: response.headers })),
          // Closing the request's scope ends it: the body is left unread.
          Effect.scoped,
          Effect.mapError((error) =>
            new EventDeliveryFailed({ reason: `request failed (${error._tag} ${error.reason})` })
          )
        )
        if (isSuccess(answer.status)) return
        const pauseUntil = pauseUntilFromHeaders(answer.headers, now)
        return yield* new EventDeliveryFailed({
          reason: `answered ${answer.status}`,
          ...(pauseUntil === undefined ? {} : { retryAfterMs: Math.max(0, pauseUntil - now) })
        })
      })

    return { key: endpointKey(endpoint.url), label, deliver } satisfies EventTarget
  })

/** `WEBHOOK_URL`'s endpoints, on the `HttpClient` in context. */
export const webhookTargetsFromConfig = Effect.flatMap(
  webhookEndpointsConfig,
  (endpoints) => Effect.forEach(endpoints, makeStandardWebhookTarget)
)

/**
 * Node's HTTP client for webhooks: undici's `request`, which follows no redirect (a 3xx answer is a
 * failed delivery, as Standard Webhooks asks). Its connections live as long as the layer.
 */
export const WebhookHttpClient = NodeHttpClient.layerUndici
