import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either, Redacted } from "effect"
import { Webhook } from "standardwebhooks"
import { decodeWebhookSecret } from "../../../src/config/EventDeliverySettings.js"
import type { JobFinishedEvent } from "../../../src/domain/JobFinishedEvent.js"
import {
  makeStandardWebhookTarget,
  standardWebhookSignature,
  WebhookHttpClient
} from "../../../src/layers/webhook/StandardWebhookTarget.js"
import { newWebhookSecret, startWebhookReceiver } from "../../support/webhookReceiver.js"

const body: JobFinishedEvent = {
  type: "ai.job.succeeded",
  timestamp: "2026-01-02T03:04:05.678Z",
  data: {
    jobId: "0190f1e2-0000-7000-8000-000000000001",
    jobType: "flashcard_generation",
    lifecycleStatus: "succeeded",
    finishedAt: "2026-01-02T03:04:05.678Z",
    artifacts: [{ artifactType: "flashcard", artifactId: "f-1" }]
  }
}

const keyOf = (secret: string) => Redacted.make(decodeWebhookSecret(secret)!)

const targetFor = (url: string, secrets: ReadonlyArray<string>) =>
  makeStandardWebhookTarget({ url: new URL(url), keys: secrets.map(keyOf) })

describe("Standard Webhooks target (a receiver on 127.0.0.1 verifying with the standardwebhooks package)", () => {
  it.scopedLive("a delivery verifies as it is, under the event's id, with every secret of a rotation", () =>
    Effect.gen(function*() {
      const current = newWebhookSecret()
      const previous = newWebhookSecret()
      const receiver = yield* startWebhookReceiver({ secret: current })
      const target = yield* targetFor(receiver.url(), [current, previous])
      yield* target.deliver({ eventId: "evt-1", body })
      yield* target.deliver({ eventId: "evt-1", body })
      const [first, second] = receiver.deliveries()
      expect(first).toMatchObject({ path: "/hooks", webhookId: "evt-1", verified: body, status: 204 })
      expect(second?.webhookId).toBe("evt-1")
      // A receiver still holding the previous secret verifies as well.
      const rotated = yield* startWebhookReceiver({ secret: previous })
      yield* (yield* targetFor(rotated.url(), [current, previous])).deliver({ eventId: "evt-2", body })
      expect(rotated.deliveries()[0]?.verified).toStrictEqual(body)
      // One with another secret does not.
      const stranger = yield* startWebhookReceiver({ secret: newWebhookSecret() })
      yield* (yield* targetFor(stranger.url(), [current])).deliver({ eventId: "evt-3", body })
      expect(stranger.deliveries()[0]?.verified).toBeUndefined()
      expect(target.label).toBe(`webhook http://127.0.0.1:${receiver.port}/hooks`)
    }).pipe(Effect.provide(WebhookHttpClient)))

  it.scopedLive("an answer other than 2xx fails with its status only, and a Retry-After is passed on", () =>
    Effect.gen(function*() {
      const secret = newWebhookSecret()
      const receiver = yield* startWebhookReceiver({
        secret,
        answer: () => ({ status: 503, headers: { "retry-after": "7" } })
      })
      const target = yield* targetFor(receiver.url(), [secret])
      const failed = yield* Effect.flip(target.deliver({ eventId: "evt-1", body }))
      expect(failed.reason).toBe("answered 503")
      expect(failed.retryAfterMs).toBe(7_000)
      expect(JSON.stringify(failed)).not.toContain("the receiver's answer body")
    }).pipe(Effect.provide(WebhookHttpClient)))

  it.scopedLive("a redirect is not followed: the delivery fails and the other address is never asked", () =>
    Effect.gen(function*() {
      const secret = newWebhookSecret()
      const receiver = yield* startWebhookReceiver({
        secret,
        answer: (request) => (request.path === "/moved" ? 204 : { status: 307, headers: { location: "/moved" } })
      })
      const target = yield* targetFor(receiver.url(), [secret])
      const failed = yield* Effect.flip(target.deliver({ eventId: "evt-1", body }))
      expect(failed.reason).toBe("answered 307")
      expect(receiver.deliveries().map((delivery) => delivery.path)).toEqual(["/hooks"])
    }).pipe(Effect.provide(WebhookHttpClient)))

  it.scopedLive("the answer's body is never read: a 2xx whose body never ends acknowledges at once", () =>
    Effect.gen(function*() {
      const secret = newWebhookSecret()
      const receiver = yield* startWebhookReceiver({ secret, answer: () => ({ status: 200, endless: true }) })
      const target = yield* targetFor(receiver.url(), [secret])
      const result = yield* Effect.either(
        target.deliver({ eventId: "evt-1", body }).pipe(Effect.timeout(Duration.seconds(5)))
      )
      expect(Either.isRight(result)).toBe(true)
    }).pipe(Effect.provide(WebhookHttpClient)))

  it.scopedLive("nobody listening is a failed delivery; an endpoint's query never reaches its label", () =>
    Effect.gen(function*() {
      const secret = newWebhookSecret()
      const receiver = yield* startWebhookReceiver({ secret })
      const url = receiver.url("/hooks?token=s3cret")
      yield* receiver.close
      const target = yield* targetFor(url, [secret])
      const failed = yield* Effect.flip(target.deliver({ eventId: "evt-1", body }))
      expect(failed.reason).toMatch(/^request failed \(RequestError Transport\)$/)
      expect(target.label).not.toContain("s3cret")
      expect(target.key).toMatch(/^webhook:[0-9a-f]{16}$/)
      // The signature is the package's own, byte for byte.
      expect(standardWebhookSignature([keyOf(secret)], "evt-9", 1_700_000_000, "{}")).toBe(
        new Webhook(secret).sign("evt-9", new Date(1_700_000_000_000), "{}")
      )
    }).pipe(Effect.provide(WebhookHttpClient)))
})
