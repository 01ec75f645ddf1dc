import { describe, expect, it } from "@effect/vitest"
import { sentWhileRedisPaused, type TimedRequest } from "../../chaos/load.js"

describe("creates held to the Redis-pause deadline", () => {
  it("are those sent while Redis was paused, to an API that served all along", () => {
    const api1 = "http://127.0.0.1:1001"
    const api2 = "http://127.0.0.1:1002"
    const request = (apiUrl: string, sentAtMs: number, ms: number): TimedRequest => ({
      apiUrl,
      sentAtMs,
      ms,
      answer: "503"
    })
    const requests = [
      request(api1, 900, 500), // before the pause
      request(api1, 1_000, 4_000), // during it
      request(api2, 2_000, 3_000), // during it, but its API was stopped meanwhile
      request(api1, 6_000, 100) // after it
    ]
    const held = sentWhileRedisPaused(requests, [{ fromMs: 1_000, toMs: 6_000 }], [{
      apiUrl: api2,
      fromMs: 3_000,
      toMs: 4_500
    }])
    expect(held).toStrictEqual([requests[1]])
  })
})
