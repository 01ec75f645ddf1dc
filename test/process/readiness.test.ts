import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Option, Schema } from "effect"
import { CheckResultSchema, ReadyResponse } from "../../src/http/ApiSchemas.js"
import { ProcessTestError } from "./support/childProcess.js"
import { decodeBody, engineEnv, engineStorage, httpRequest, startProgram } from "./support/engine.js"
import { killRedisServer, startRedisServer } from "./support/redisServer.js"

/**
 * The 503 body. `NotReady` declares `checks` too, but the API-wide `PlatformUnavailable` (same
 * status, same code) wins the error encoding and drops them, so they are optional here.
 */
const NotReadyBody = Schema.Struct({
  code: Schema.Literal("PLATFORM_UNAVAILABLE"),
  message: Schema.String,
  checks: Schema.optional(Schema.Array(CheckResultSchema))
})

/** Polls `/readyz` until it answers `status`; returns that answer. */
const awaitReadyz = (baseUrl: string, status: 200 | 503, timeout: Duration.DurationInput) =>
  Effect.gen(function*() {
    let last = { status: 0, text: "" }
    return yield* Effect.gen(function*() {
      while (true) {
        last = yield* httpRequest("GET", `${baseUrl}/readyz`)
        if (last.status === status) return last
        yield* Effect.sleep(Duration.millis(200))
      }
    }).pipe(
      Effect.timeoutFail({
        duration: timeout,
        onTimeout: () =>
          new ProcessTestError({ message: `/readyz never answered ${status}; last ${last.status} ${last.text}` })
      })
    )
  })

describe("issue 7: /readyz follows Redis", () => {
  it.live("503 naming Redis while a (private) Redis is down, 200 again once it is back", () =>
    Effect.gen(function*() {
      const redis = yield* startRedisServer()
      const storage = yield* engineStorage("readyz", { redisUrl: redis.url })
      const api = yield* startProgram("api", "api", engineEnv(storage))

      const up = yield* awaitReadyz(api.baseUrl, 200, Duration.seconds(10)).pipe(
        Effect.flatMap(decodeBody(ReadyResponse))
      )
      expect(up.checks.map((check) => [check.name, check.status])).toEqual([["database", "up"], ["redis", "up"]])

      yield* killRedisServer(redis)
      const downAt = Date.now()
      const down = yield* awaitReadyz(api.baseUrl, 503, Duration.seconds(10)).pipe(
        Effect.flatMap(decodeBody(NotReadyBody))
      )
      const noticedMs = Date.now() - downAt
      expect(down.code).toBe("PLATFORM_UNAVAILABLE")
      expect(down.message.toLowerCase()).toContain("redis")
      expect(down.message.toLowerCase()).not.toContain("database")
      if (down.checks !== undefined) {
        expect(down.checks.find((check) => check.name === "redis")?.status).toBe("down")
        expect(down.checks.find((check) => check.name === "database")?.status).toBe("up")
      }
      // The process lives on through the outage.
      expect(Option.isNone(yield* api.exitNow)).toBe(true)

      yield* startRedisServer({ port: redis.port, name: "redis-server (restarted)" })
      const backAt = Date.now()
      const back = yield* awaitReadyz(api.baseUrl, 200, Duration.seconds(15)).pipe(
        Effect.flatMap(decodeBody(ReadyResponse))
      )
      const recoveredMs = Date.now() - backAt
      expect(back.status).toBe("ready")
      console.log(`/readyz: 503 ${noticedMs} ms after Redis died, 200 ${recoveredMs} ms after it came back`)
      expect(Schema.is(ReadyResponse)(back)).toBe(true)
    }).pipe(Effect.scoped), { timeout: 60_000 })
})
