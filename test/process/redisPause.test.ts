import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Schema } from "effect"
import { Redis } from "ioredis"
import {
  decodeBody,
  engineEnv,
  engineStorage,
  flashcardRequest,
  httpRequest,
  pollJob,
  startProgram,
  tokenFor
} from "./support/engine.js"
import { startRedisServer } from "./support/redisServer.js"

const Answer = Schema.Struct({ jobId: Schema.optional(Schema.String), code: Schema.optional(Schema.String) })

/** What the create's Redis waits add up to at most: the gate's check (1 s) and the creator's own add (1 s), with room for a loaded machine. */
const answerWithinMs = 3_000

describe("creates while Redis is paused (CLIENT PAUSE)", () => {
  it.live(
    "every create answers within about a second: 503 PLATFORM_UNAVAILABLE, or 202 for a job that committed and runs once Redis is back",
    () =>
      Effect.gen(function*() {
        const redis = yield* startRedisServer()
        const storage = yield* engineStorage("redis_pause", { redisUrl: redis.url })
        const engine = yield* startProgram("all-in-one", "all-in-one", engineEnv(storage))
        const token = yield* tokenFor(storage, "pause-user")
        const create = (index: number) =>
          Effect.gen(function*() {
            const started = Date.now()
            const response = yield* httpRequest("POST", `${engine.baseUrl}/api/ai/flashcard-generations`, {
              token,
              body: flashcardRequest(index)
            })
            return { status: response.status, ms: Date.now() - started, body: yield* decodeBody(Answer)(response) }
          })
        expect((yield* create(0)).status).toBe(202)

        const admin = yield* Effect.acquireRelease(
          Effect.sync(() => new Redis(redis.url, { maxRetriesPerRequest: 1 })),
          (client) => Effect.promise(() => client.quit()).pipe(Effect.ignore)
        )
        const pauseMs = 8_000
        yield* Effect.promise(() => admin.call("CLIENT", "PAUSE", String(pauseMs), "ALL"))
        const pausedAt = Date.now()
        const answers = []
        // Creates one after another for most of the pause: the gate's cached answer expires within a second.
        while (Date.now() - pausedAt < pauseMs - answerWithinMs - 1_000) answers.push(yield* create(answers.length + 1))

        for (const answer of answers) {
          expect(answer.ms, JSON.stringify(answer)).toBeLessThan(answerWithinMs)
          expect([202, 503]).toContain(answer.status)
          if (answer.status === 503) expect(answer.body.code).toBe("PLATFORM_UNAVAILABLE")
        }
        expect(answers.filter((answer) => answer.status === 503).length).toBeGreaterThan(0)
        // Jobs acknowledged during the pause are queued by the dispatcher's sweep once Redis answers again.
        for (const answer of answers) {
          if (answer.status !== 202 || answer.body.jobId === undefined) continue
          const done = yield* pollJob(engine.baseUrl, token, answer.body.jobId, { timeout: Duration.seconds(40) })
          expect(done.lifecycleStatus).toBe("succeeded")
        }
      }).pipe(Effect.scoped),
    { timeout: 90_000 }
  )
})
