import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Option, Schema } from "effect"
import { finishedEventId } from "../../src/domain/JobFinishedEvent.js"
import { OutboxRepository } from "../../src/services/outbox/OutboxRepository.js"
import { UsageLog } from "../../src/services/UsageLog.js"
import { WorkerDirectory } from "../../src/services/WorkerDirectory.js"
import {
  bodyAs,
  ErrorBody,
  feynmanBody,
  flashcardBody,
  JobBody,
  jobById,
  markFailed,
  markRunning,
  markSucceeded,
  memoryEngine,
  startApi,
  tokenFor
} from "./support/harness.js"

const AdminJob = Schema.Struct({
  ...JobBody.fields,
  userId: Schema.String,
  targetType: Schema.String,
  targetId: Schema.String,
  credentialMode: Schema.String,
  attemptCount: Schema.Number,
  maxAttempts: Schema.Number,
  updatedAt: Schema.String,
  cancelRequestedAt: Schema.optional(Schema.String)
})
const AdminPage = Schema.Struct({ items: Schema.Array(AdminJob), nextCursor: Schema.NullOr(Schema.String) })
const Timeline = Schema.Struct({
  job: AdminJob,
  attempts: Schema.Array(Schema.Struct({
    leaseNo: Schema.Number,
    calls: Schema.Array(
      Schema.Struct({
        model: Schema.String,
        latencyMs: Schema.Number,
        totalTokens: Schema.Number,
        costMicros: Schema.Number,
        outcome: Schema.String
      })
    )
  })),
  events: Schema.Array(
    Schema.Struct({ at: Schema.String, kind: Schema.String, detail: Schema.optional(Schema.String) })
  ),
  retriedFrom: Schema.optional(Schema.String),
  retriedAs: Schema.Array(Schema.String)
})

const setup = Effect.gen(function*() {
  const api = yield* startApi(memoryEngine())
  const userA = yield* tokenFor("user-a")
  const userB = yield* tokenFor("user-b")
  const admin = yield* tokenFor("admin-1", "SUPER_ADMIN")
  const create = (token: string, kind: "flashcard" | "feynman" = "flashcard") =>
    Effect.flatMap(
      kind === "flashcard"
        ? api.request("POST", "/api/ai/flashcard-generations", { token, body: flashcardBody() })
        : api.request("POST", "/api/ai/feynman-evaluations", { token, body: feynmanBody() }),
      bodyAs(JobBody)
    )
  return { api, userA, userB, admin, create }
})

const failure = {
  errorCode: "PROVIDER_UNAVAILABLE",
  publicErrorMessage: "The AI provider is unavailable right now. Please try again later.",
  internalErrorMessage: "upstream 502 from provider after 3 attempts"
}

describe("admin jobs", () => {
  it.live("GET /admin-api/ai/jobs lists every user's jobs, filtered, newest first, with a cursor", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, userB, admin, create } = yield* setup
        const a1 = yield* create(userA)
        yield* Effect.sleep("5 millis")
        const b1 = yield* create(userB, "feynman")
        yield* Effect.sleep("5 millis")
        const a2 = yield* create(userA, "feynman")
        yield* api.run(markFailed(a2.jobId, failure))

        const all = yield* bodyAs(AdminPage)(yield* api.request("GET", "/admin-api/ai/jobs", { token: admin }))
        expect(all.items.map((j) => j.jobId)).toEqual([a2.jobId, b1.jobId, a1.jobId])
        expect(all.items[0]).toMatchObject({ userId: "user-a", internalErrorMessage: failure.internalErrorMessage })
        expect(all.nextCursor).toBeNull()

        const ids = (q: string) =>
          Effect.map(
            Effect.flatMap(api.request("GET", `/admin-api/ai/jobs${q}`, { token: admin }), bodyAs(AdminPage)),
            (page) => page.items.map((j) => j.jobId)
          )
        expect(yield* ids("?jobType=feynman_evaluation")).toEqual([a2.jobId, b1.jobId])
        expect(yield* ids("?status=failed")).toEqual([a2.jobId])
        expect(yield* ids("?queueName=ai-background")).toEqual([a1.jobId])
        expect(yield* ids(`?createdFrom=${encodeURIComponent(b1.createdAt)}`)).toEqual([a2.jobId, b1.jobId])
        expect(yield* ids(`?createdTo=${encodeURIComponent(b1.createdAt)}`)).toEqual([a1.jobId])

        const first = yield* bodyAs(AdminPage)(
          yield* api.request("GET", "/admin-api/ai/jobs?limit=2", { token: admin })
        )
        expect(first.items).toHaveLength(2)
        expect(first.nextCursor).not.toBeNull()
        expect(yield* ids(`?limit=2&cursor=${first.nextCursor}`)).toEqual([a1.jobId])

        for (
          const [q, field] of [
            ["?queueName=ai-nowhere", "queueName"],
            ["?createdFrom=yesterday", "createdFrom"],
            ["?status=done", "status"],
            ["?limit=1000", "limit"]
          ] as const
        ) {
          const bad = yield* api.request("GET", `/admin-api/ai/jobs${q}`, { token: admin })
          expect(bad.status).toBe(400)
          const error = yield* bodyAs(ErrorBody)(bad)
          expect(error.code).toBe("INVALID_REQUEST")
          expect(error.message).toContain(field)
        }
      })
    ))

  it.live("GET /admin-api/ai/jobs/:jobId adds internalErrorMessage; a missing job is 404", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, admin, create } = yield* setup
        const job = yield* create(userA)
        yield* api.run(markFailed(job.jobId, failure))
        const detail = yield* api.request("GET", `/admin-api/ai/jobs/${job.jobId}`, { token: admin })
        expect(detail.status).toBe(200)
        expect(yield* bodyAs(AdminJob)(detail)).toMatchObject({
          jobId: job.jobId,
          userId: "user-a",
          lifecycleStatus: "failed",
          errorCode: failure.errorCode,
          publicErrorMessage: failure.publicErrorMessage,
          internalErrorMessage: failure.internalErrorMessage,
          attemptCount: 1
        })
        const missing = yield* api.request("GET", "/admin-api/ai/jobs/00000000-0000-7000-8000-000000000000", {
          token: admin
        })
        expect(missing.status).toBe(404)
        expect(yield* bodyAs(ErrorBody)(missing)).toMatchObject({ code: "JOB_NOT_FOUND" })
      })
    ))

  it.live("POST /admin-api/ai/jobs/:jobId/retry: 201 a new job with the same input for failed or cancelled jobs; else 409", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, admin, create } = yield* setup
        const failed = yield* create(userA, "feynman")
        yield* api.run(markFailed(failed.jobId, failure))
        const cancelled = yield* create(userA)
        yield* api.request("POST", `/api/ai/jobs/${cancelled.jobId}/cancel`, { token: userA })

        for (const original of [failed, cancelled]) {
          const response = yield* api.request("POST", `/admin-api/ai/jobs/${original.jobId}/retry`, { token: admin })
          expect(response.status).toBe(201)
          const retried = yield* bodyAs(AdminJob)(response)
          expect(retried.jobId).not.toBe(original.jobId)
          expect(retried).toMatchObject({
            jobType: original.jobType,
            lifecycleStatus: "queued",
            userId: "user-a",
            priority: original.priority
          })
          const [before, after] = yield* api.run(Effect.all([jobById(original.jobId), jobById(retried.jobId)]))
          expect(after.input).toEqual(before.input)
          expect(after.targetId).toBe(before.targetId)
          // The user sees the retried job as theirs.
          const own = yield* api.request("GET", `/api/ai/jobs/${retried.jobId}`, { token: userA })
          expect(own.status).toBe(200)
        }

        const queued = yield* create(userA)
        const running = yield* create(userA)
        yield* api.run(markRunning(running.jobId))
        const succeeded = yield* create(userA)
        yield* api.run(markSucceeded(succeeded.jobId, { flashcards: [{ front: "f", back: "b" }] }))
        for (const job of [queued, running, succeeded]) {
          const refused = yield* api.request("POST", `/admin-api/ai/jobs/${job.jobId}/retry`, { token: admin })
          expect(refused.status).toBe(409)
          expect(yield* bodyAs(ErrorBody)(refused)).toMatchObject({ code: "JOB_NOT_RETRYABLE" })
        }
        const missing = yield* api.request("POST", "/admin-api/ai/jobs/00000000-0000-7000-8000-000000000000/retry", {
          token: admin
        })
        expect(missing.status).toBe(404)
      })
    ))
})

describe("a job's timeline", () => {
  it.live("GET /admin-api/ai/jobs/:jobId/timeline: provider calls, events with the cancel and the retries, links both ways", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, admin, create } = yield* setup
        const original = yield* create(userA)
        yield* api.run(Effect.flatMap(UsageLog, (usage) =>
          usage.record({
            id: "call-1",
            jobId: original.jobId,
            leaseNo: 1,
            attemptNo: 1,
            credentialMode: "platform_key",
            provider: "deepseek",
            model: "deepseek-chat",
            promptTokens: 0,
            completionTokens: 0,
            totalTokens: 0,
            costMicros: 0,
            latencyMs: 1200,
            errorCode: "PROVIDER_UNAVAILABLE"
          })))
        yield* api.request("POST", `/api/ai/jobs/${original.jobId}/cancel`, { token: userA })
        const retry = (jobId: string) =>
          Effect.flatMap(api.request("POST", `/admin-api/ai/jobs/${jobId}/retry`, { token: admin }), bodyAs(AdminJob))
        const first = yield* retry(original.jobId)
        yield* api.run(markFailed(first.jobId, failure))
        const second = yield* retry(first.jobId)
        const timelineOf = (jobId: string) =>
          Effect.flatMap(api.request("GET", `/admin-api/ai/jobs/${jobId}/timeline`, { token: admin }), bodyAs(Timeline))

        const ofOriginal = yield* timelineOf(original.jobId)
        expect(ofOriginal.job).toMatchObject({ jobId: original.jobId, lifecycleStatus: "cancelled" })
        expect(ofOriginal.attempts).toMatchObject([
          {
            leaseNo: 1,
            calls: [{
              model: "deepseek-chat",
              latencyMs: 1200,
              totalTokens: 0,
              costMicros: 0,
              outcome: "PROVIDER_UNAVAILABLE"
            }]
          }
        ])
        expect(ofOriginal.events.map((event) => event.kind)).toEqual([
          "created",
          "cancel_requested",
          "cancelled",
          "retry_requested"
        ])
        expect(ofOriginal.events.at(-1)?.detail).toBe(`retried as ${first.jobId}`)
        expect(ofOriginal.retriedFrom).toBeUndefined()
        expect(ofOriginal.retriedAs).toEqual([first.jobId])

        const ofFirst = yield* timelineOf(first.jobId)
        expect(ofFirst.retriedFrom).toBe(original.jobId)
        expect(ofFirst.retriedAs).toEqual([second.jobId])
        expect(ofFirst.events.map((event) => event.kind)).toEqual(["created", "started", "failed", "retry_requested"])
        expect(ofFirst.events[0]?.detail).toContain(`retry of ${original.jobId}`)

        const ofSecond = yield* timelineOf(second.jobId)
        expect([ofSecond.retriedFrom, ofSecond.retriedAs]).toEqual([first.jobId, []])

        const asUser = yield* api.request("GET", `/admin-api/ai/jobs/${original.jobId}/timeline`, { token: userA })
        expect(asUser.status).toBe(403)
        const missing = yield* api.request("GET", "/admin-api/ai/jobs/00000000-0000-7000-8000-000000000000/timeline", {
          token: admin
        })
        expect(missing.status).toBe(404)
      })
    ))
})

describe("admin outbox and workers", () => {
  it.live("GET /admin-api/ai/outbox counts by status; replay sends a dead event back to pending", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, userA, admin, create } = yield* setup
        const job = yield* create(userA)
        yield* create(userA)
        const counts = yield* api.request("GET", "/admin-api/ai/outbox", { token: admin })
        expect(counts.status).toBe(200)
        expect(counts.body).toEqual({ pending: 2, processing: 0, published: 0, failed: 0, dead: 0 })

        const dead = yield* api.run(
          Effect.gen(function*() {
            const outbox = yield* OutboxRepository
            const claimed = yield* outbox.claimBatch("dispatcher-test", 10)
            const event = claimed.find((e) => e.aggregateId === job.jobId)
            if (event === undefined) return yield* Effect.dieMessage("event not claimed")
            yield* outbox.markDispatchFailed(event.id, "dispatcher-test", "redis down", {
              retryDelay: Duration.millis(0),
              maxAttempts: 1
            })
            const other = claimed.find((e) => e.aggregateId !== job.jobId)
            if (other !== undefined) yield* outbox.markPublishedMany([other.id], "dispatcher-test")
            return { deadId: event.id, publishedId: other?.id ?? "" }
          }).pipe(Effect.orDie)
        )
        const after = yield* api.request("GET", "/admin-api/ai/outbox", { token: admin })
        expect(after.body).toEqual({ pending: 0, processing: 0, published: 1, failed: 0, dead: 1 })

        const notDead = yield* api.request("POST", `/admin-api/ai/outbox/${dead.publishedId}/replay`, { token: admin })
        expect(notDead.status).toBe(409)
        expect(yield* bodyAs(ErrorBody)(notDead)).toMatchObject({ code: "OUTBOX_EVENT_NOT_DEAD" })
        const missing = yield* api.request("POST", "/admin-api/ai/outbox/00000000-0000-7000-8000-000000000000/replay", {
          token: admin
        })
        expect(missing.status).toBe(404)
        expect(yield* bodyAs(ErrorBody)(missing)).toMatchObject({ code: "OUTBOX_EVENT_NOT_FOUND" })

        const replayed = yield* api.request("POST", `/admin-api/ai/outbox/${dead.deadId}/replay`, { token: admin })
        expect(replayed.status).toBe(200)
        expect(replayed.body).toMatchObject({
          eventId: dead.deadId,
          aggregateId: job.jobId,
          status: "pending",
          attemptCount: 0
        })
        const final = yield* api.request("GET", "/admin-api/ai/outbox", { token: admin })
        expect(final.body).toMatchObject({ pending: 1, dead: 0 })
      })
    ))

  it.live("a terminal event whose delivery gave up is listed dead with what its endpoint answered, and replayed to the endpoints still owed it", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { admin, api, create, userA } = yield* setup
        const job = yield* create(userA)
        yield* api.run(markFailed(job.jobId, failure))
        const eventId = finishedEventId(job.jobId)
        yield* api.run(
          Effect.gen(function*() {
            const outbox = yield* OutboxRepository
            const claimed = yield* outbox.claimBatch("dispatcher-test", 10, "notify")
            expect(claimed.map((event) => event.id)).toEqual([eventId])
            yield* outbox.settleDelivery(eventId, "dispatcher-test", {
              _tag: "GiveUp",
              deliveredTo: ["webhook:aaaa"],
              error: "webhook https://b.example/hooks: answered 503"
            })
          }).pipe(Effect.orDie)
        )
        const dead = yield* api.request("GET", "/admin-api/ai/outbox/events?status=dead", { token: admin })
        expect(dead.status).toBe(200)
        expect(dead.body).toMatchObject({
          items: [{
            eventId,
            eventType: "ai.job.failed",
            aggregateId: job.jobId,
            status: "dead",
            attemptCount: 1,
            lastError: "webhook https://b.example/hooks: answered 503"
          }]
        })
        const replayed = yield* api.request("POST", `/admin-api/ai/outbox/${eventId}/replay`, { token: admin })
        expect(replayed.status).toBe(200)
        expect(replayed.body).toMatchObject({ eventId, eventType: "ai.job.failed", status: "pending", attemptCount: 0 })
        const pending = yield* api.run(
          Effect.flatMap(OutboxRepository, (outbox) => outbox.findById(eventId)).pipe(Effect.orDie)
        )
        expect(Option.getOrThrow(pending)).toMatchObject({
          status: "pending",
          lane: "notify",
          deliveredTo: ["webhook:aaaa"]
        })
      })
    ))

  it.live("GET /admin-api/ai/workers lists live workers and the jobs each holds", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { api, admin } = yield* setup
        const empty = yield* api.request("GET", "/admin-api/ai/workers", { token: admin })
        expect(empty.body).toEqual({ workers: [] })
        const heartbeat = {
          instanceId: "worker-1",
          hostname: "host-1",
          pid: 42,
          queues: ["ai-interactive"],
          jobIds: ["job-1", "job-2"],
          startedAt: new Date().toISOString(),
          beatAt: new Date().toISOString()
        }
        yield* api.run(Effect.flatMap(WorkerDirectory, (directory) => directory.beat(heartbeat)))
        const live = yield* api.request("GET", "/admin-api/ai/workers", { token: admin })
        expect(live.status).toBe(200)
        expect(live.body).toEqual({ workers: [heartbeat] })
      })
    ))
})
