import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { batchCreationCases, batchSuiteLimits } from "./support/batchCases.js"
import { apiLayer, bodyAs, ErrorBody, flashcardBody, memoryEngine, startApi, tokenFor } from "./support/harness.js"

batchCreationCases("memory", apiLayer(memoryEngine(batchSuiteLimits)))

describe("batch creation: the body limit", () => {
  it.live("a batch body past HTTP_MAX_BODY_BYTES is 413, and nothing is created", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const api = yield* startApi(memoryEngine(), { transport: { maxBodyBytes: 8_192 } })
        const token = yield* tokenFor("batch-413")
        const items = Array.from({ length: 20 }, (_, index) =>
          flashcardBody({ sourceText: `${index} ${"long text ".repeat(60)}` }))
        const refused = yield* api.request("POST", "/api/ai/flashcard-generations/batch", { token, body: { items } })
        expect(refused.status, refused.text).toBe(413)
        expect((yield* bodyAs(ErrorBody)(refused)).code).toBe("PAYLOAD_TOO_LARGE")
        const listed = yield* api.request("GET", "/api/ai/jobs", { token })
        expect(listed.body).toMatchObject({ items: [] })
      })
    ))
})
