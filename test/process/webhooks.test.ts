import { describe, expect, it } from "@effect/vitest"
import { Worker } from "bullmq"
import { Duration, Effect, Schedule, Schema } from "effect"
import { Redis } from "ioredis"
import { randomBytes } from "node:crypto"
import { finishedEventId } from "../../src/domain/JobFinishedEvent.js"
import { JobStatusResponse } from "../../src/http/ApiSchemas.js"
import { newWebhookSecret, type ReceivedDelivery, startWebhookReceiver } from "../support/webhookReceiver.js"
import {
  createJob,
  decodeBody,
  dispatcherStarted,
  engineEnv,
  engineStorage,
  httpRequest,
  pollJob,
  queryRows,
  startProgram,
  tokenFor,
  withDatabase,
  workerStarted
} from "./support/engine.js"

/** The deliveries a receiver acknowledged (2xx) and verified, by webhook id. */
const acknowledged = (deliveries: ReadonlyArray<ReceivedDelivery>) =>
  deliveries.filter((delivery) => delivery.status >= 200 && delivery.status < 300 && delivery.verified !== undefined)

const idsOf = (deliveries: ReadonlyArray<ReceivedDelivery>) => deliveries.map((delivery) => delivery.webhookId)

const TerminalEventRow = Schema.Struct({
  id: Schema.String,
  eventType: Schema.String,
  status: Schema.String,
  aggregateId: Schema.String
})
const terminalEventRows = (storage: Parameters<typeof withDatabase>[0]) =>
  withDatabase(
    storage,
    queryRows(
      TerminalEventRow,
      "SELECT id, event_type, status, aggregate_id FROM outbox_event WHERE lane = 'notify' ORDER BY aggregate_id"
    )
  )

/** The rows once no delivery is in flight: the dispatcher marks a row after the receiver's answer. */
const settledTerminalEventRows = (storage: Parameters<typeof withDatabase>[0]) =>
  terminalEventRows(storage).pipe(
    Effect.filterOrFail((rows) => rows.every((row) => row.status !== "processing" && row.status !== "pending")),
    Effect.retry(Schedule.spaced(Duration.millis(100)).pipe(Schedule.upTo(Duration.seconds(10)))),
    // Still in flight after the wait: the rows as they are, for the assertion to show.
    Effect.orElse(() => terminalEventRows(storage))
  )

describe("issue 35: jobs' ends announced as Standard Webhooks and on a domain-events queue", () => {
  it.live(
    "succeeded, failed and cancelled jobs each arrive once under one id: at a receiver that answered 500 once, one that was down for 15 s, and a BullMQ worker",
    () =>
      Effect.gen(function*() {
        const storage = yield* engineStorage("webhooks")
        const secret = newWebhookSecret()
        const flaky = yield* startWebhookReceiver({ secret, answer: (_, index) => (index === 0 ? 500 : 204) })
        const late = yield* startWebhookReceiver({ secret })
        yield* late.close
        // The job's input carries this; no delivery may.
        const marker = `input-marker-${randomBytes(6).toString("hex")}`

        // A plain BullMQ worker on the domain-events queue, under the engine's BullMQ prefix.
        const consumed: Array<{ readonly id: string; readonly name: string; readonly data: unknown }> = []
        const connection = yield* Effect.acquireRelease(
          Effect.sync(() => new Redis(storage.redisUrl, { maxRetriesPerRequest: null })),
          (redis) => Effect.promise(() => redis.quit()).pipe(Effect.ignore)
        )
        yield* Effect.acquireRelease(
          Effect.sync(() =>
            new Worker(
              "domain-events",
              async (job) => {
                consumed.push({ id: job.id ?? "", name: job.name, data: job.data })
              },
              { connection, prefix: `${storage.redisPrefix}:bull` }
            )
          ),
          (worker) => Effect.promise(() => worker.close())
        )

        const env = engineEnv(storage, {
          WEBHOOK_URL: `${flaky.url()} ${late.url()}`,
          WEBHOOK_SECRET: secret,
          WEBHOOK_TIMEOUT_MS: "2000",
          DOMAIN_EVENTS_QUEUE: "domain-events",
          EVENT_RETRY_BASE_MS: "500",
          EVENT_RETRY_MAX_MS: "1000",
          CONTENT_SAFETY_BLOCKED_TERMS: "forbidden-term",
          // Only background jobs run: an evaluation stays queued until it is cancelled.
          WORKER_QUEUES: "ai-background"
        })
        const [api] = yield* Effect.all(
          [
            startProgram("api", "api", env),
            startProgram("dispatcher", "dispatcher", env, { ready: dispatcherStarted }),
            startProgram("worker", "worker", env, { ready: workerStarted })
          ],
          { concurrency: "unbounded" }
        )
        const token = yield* tokenFor(storage, "webhook-user")
        const succeeding = yield* createJob(api.baseUrl, token, "flashcard-generations", {
          sourceText: `Photosynthesis makes sugar. ${marker}. Plants need light.`,
          count: 2
        })
        const failing = yield* createJob(api.baseUrl, token, "flashcard-generations", {
          sourceText: `This mentions a forbidden-term. ${marker}.`,
          count: 2
        })
        const cancelling = yield* createJob(api.baseUrl, token, "feynman-evaluations", {
          concept: marker,
          explanation: "Energy is conserved."
        })
        const cancelAnswer = yield* httpRequest("POST", `${api.baseUrl}/api/ai/jobs/${cancelling.jobId}/cancel`, {
          token
        })
        expect((yield* decodeBody(JobStatusResponse)(cancelAnswer)).lifecycleStatus).toBe("cancelled")
        const ended = yield* Effect.forEach([succeeding, failing], (job) => pollJob(api.baseUrl, token, job.jobId))
        expect(ended.map((job) => job.lifecycleStatus)).toEqual(["succeeded", "failed"])
        const expected = new Map([
          [finishedEventId(succeeding.jobId), { jobId: succeeding.jobId, type: "ai.job.succeeded" }],
          [finishedEventId(failing.jobId), { jobId: failing.jobId, type: "ai.job.failed" }],
          [finishedEventId(cancelling.jobId), { jobId: cancelling.jobId, type: "ai.job.cancelled" }]
        ])

        // The receiver that answered its first delivery with 500 has every event, that one retried.
        const downSince = Date.now()
        const atFlaky = yield* flaky.waitFor(
          (deliveries) => new Set(idsOf(acknowledged(deliveries))).size === 3,
          Duration.seconds(20)
        )
        expect(atFlaky[0]?.status).toBe(500)
        expect(idsOf(atFlaky.filter((delivery) => delivery.status === 204))).toContain(atFlaky[0]?.webhookId)
        // The domain-events queue: each event once, its queue job id the event id.
        const queueDeadline = Date.now() + 10_000
        while (consumed.length < 3 && Date.now() < queueDeadline) yield* Effect.sleep(Duration.millis(50))

        // The other receiver comes back after 15 s down and gets every event then.
        yield* Effect.sleep(Duration.millis(Math.max(0, 15_000 - (Date.now() - downSince))))
        yield* late.listen
        const atLate = yield* late.waitFor(
          (deliveries) => new Set(idsOf(acknowledged(deliveries))).size === 3,
          Duration.seconds(10)
        )

        for (const [receiver, deliveries] of [["flaky", atFlaky], ["late", atLate]] as const) {
          const ok = acknowledged(deliveries)
          // Once per id, each under the id derived from its job, with the right type.
          expect(idsOf(ok).sort(), receiver).toEqual([...expected.keys()].sort())
          for (const delivery of ok) {
            const event = expected.get(delivery.webhookId)!
            expect(delivery.verified, receiver).toMatchObject({ type: event.type, data: { jobId: event.jobId } })
          }
          expect(deliveries.every((delivery) => !delivery.body.includes(marker)), receiver).toBe(true)
          expect(deliveries.every((delivery) => delivery.verified !== undefined), receiver).toBe(true)
        }
        const failedBody = acknowledged(atLate).find((delivery) =>
          delivery.webhookId === finishedEventId(failing.jobId)
        )
        expect(failedBody?.verified).toMatchObject({
          data: { lifecycleStatus: "failed", errorCode: "CONTENT_SAFETY_BLOCKED", artifacts: [] }
        })
        const succeededBody = acknowledged(atLate).find((delivery) =>
          delivery.webhookId === finishedEventId(succeeding.jobId)
        )
        expect(succeededBody?.verified).toMatchObject({
          data: {
            lifecycleStatus: "succeeded",
            artifacts: [{ artifactType: "flashcard" }, { artifactType: "flashcard" }]
          }
        })

        expect(consumed.map((job) => job.id).sort()).toEqual([...expected.keys()].sort())
        for (const job of consumed) {
          expect(job.name).toBe(expected.get(job.id)?.type)
          expect(job.data).toMatchObject({ type: job.name, data: { jobId: expected.get(job.id)?.jobId } })
          expect(JSON.stringify(job.data)).not.toContain(marker)
        }
        const rows = yield* settledTerminalEventRows(storage)
        expect(rows.map((row) => [row.id, row.status]).sort()).toEqual(
          [...expected.keys()].map((id) => [id, "published"]).sort()
        )
      }).pipe(Effect.scoped),
    { timeout: 90_000 }
  )

  it.live(
    "a dispatcher killed with SIGKILL in the middle of a delivery: the event still arrives, under the same id",
    () =>
      Effect.gen(function*() {
        const storage = yield* engineStorage("webhooks_kill")
        const secret = newWebhookSecret()
        // The first delivery is held open: its dispatcher dies while waiting for the answer.
        const receiver = yield* startWebhookReceiver({ secret, answer: (_, index) => (index === 0 ? "hold" : 204) })
        const env = engineEnv(storage, {
          WEBHOOK_URL: receiver.url(),
          WEBHOOK_SECRET: secret,
          OUTBOX_LOCK_TTL_MS: "2000",
          WEBHOOK_TIMEOUT_MS: "1500"
        })
        const [api, first] = yield* Effect.all(
          [
            startProgram("api", "api", env),
            startProgram("dispatcher", "dispatcher-1", env, { ready: dispatcherStarted }),
            startProgram("worker", "worker", env, { ready: workerStarted })
          ],
          { concurrency: "unbounded" }
        )
        const token = yield* tokenFor(storage, "webhook-kill-user")
        const job = yield* createJob(api.baseUrl, token, "flashcard-generations", {
          sourceText: "Cells divide by mitosis. Chromosomes separate.",
          count: 2
        })
        yield* pollJob(api.baseUrl, token, job.jobId)
        const [held] = yield* receiver.waitFor((deliveries) => deliveries.length === 1, Duration.seconds(10))
        yield* first.signal("SIGKILL")
        yield* first.awaitExit(Duration.seconds(5))
        yield* startProgram("dispatcher", "dispatcher-2", env, { ready: dispatcherStarted })
        const deliveries = yield* receiver.waitFor((all) => acknowledged(all).length === 1, Duration.seconds(15))
        const [delivered] = acknowledged(deliveries)
        expect(held?.webhookId).toBe(finishedEventId(job.jobId))
        expect(delivered?.webhookId).toBe(held?.webhookId)
        expect(delivered?.verified).toMatchObject({ type: "ai.job.succeeded", data: { jobId: job.jobId } })
        const rows = yield* settledTerminalEventRows(storage)
        expect(rows.map((row) => [row.id, row.status])).toEqual([[held?.webhookId, "published"]])
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
