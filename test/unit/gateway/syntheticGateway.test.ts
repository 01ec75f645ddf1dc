import { expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Redacted, Schema, TestClock } from "effect"
import { ProviderError } from "../../../src/domain/ExecutionError.js"
import { SyntheticGatewayControl, SyntheticGatewayLayer } from "../../../src/layers/gateway/SyntheticGateway.js"
import { AiGateway, type GenerateRequest } from "../../../src/services/AiGateway.js"
import { CANARY_KEY } from "../../support/canary.js"

// The output shapes of issue 4 item 8.
const FlashcardOutput = Schema.Struct({
  flashcards: Schema.Array(Schema.Struct({ front: Schema.NonEmptyString, back: Schema.NonEmptyString })).pipe(
    Schema.minItems(1)
  )
})
const FeynmanOutput = Schema.Struct({
  score: Schema.Int.pipe(Schema.between(0, 100)),
  feedback: Schema.NonEmptyString,
  gaps: Schema.Array(Schema.String)
})

const sourceText =
  "Photosynthesis converts light energy into chemical energy. It takes place in the chloroplasts of plant cells. " +
  "Chlorophyll absorbs mostly blue and red light. The process releases oxygen as a by-product. " +
  "Glucose made by photosynthesis feeds the plant."

const request = (type: string, input: unknown, overrides: Partial<GenerateRequest> = {}): GenerateRequest => ({
  job: { id: "job-1", type, attemptNo: 1 },
  messages: [{ role: "user", content: "rendered prompt" }],
  provider: "synthetic",
  model: "synthetic",
  credential: { mode: "platform_key", credentialId: null, provider: "synthetic", apiKey: Redacted.make(CANARY_KEY) },
  jsonMode: true,
  input,
  ...overrides
})

const generateWith = (seed: string, req: GenerateRequest) =>
  Effect.flatMap(AiGateway, (gateway) => gateway.generate(req)).pipe(Effect.provide(SyntheticGatewayLayer({ seed })))

it.effect("same seed and input: same output; another seed or input may differ", () =>
  Effect.gen(function*() {
    const input = { sourceText, count: 3 }
    const a = yield* generateWith("seed-1", request("flashcard_generation", input))
    const b = yield* generateWith("seed-1", request("flashcard_generation", { count: 3, sourceText }))
    expect(b.text).toBe(a.text)
    expect(b.usage).toEqual(a.usage)
    const outputs = new Set<string>()
    for (const seed of ["seed-2", "seed-3", "seed-4", "seed-5"]) {
      outputs.add((yield* generateWith(seed, request("flashcard_generation", input))).text)
    }
    expect(outputs.size).toBeGreaterThan(1)
    const feynman = { concept: "photosynthesis", explanation: "Plants use light to make sugar, for example in leaves." }
    const f1 = yield* generateWith("seed-1", request("feynman_evaluation", feynman))
    const f2 = yield* generateWith("seed-1", request("feynman_evaluation", feynman))
    expect(f2.json).toEqual(f1.json)
  }))

it.effect("outputs are schema-valid and derived from the input for the three job types", () =>
  Effect.gen(function*() {
    expect((yield* generateWith("s", request("synthetic_echo", { message: "hello" }))).json).toEqual({ echo: "hello" })
    expect((yield* generateWith("s", request("unknown_type", { any: [1] }))).json).toEqual({ any: [1] })

    const cards = yield* Schema.decodeUnknown(FlashcardOutput)(
      (yield* generateWith("s", request("flashcard_generation", { sourceText, count: 3 }))).json
    )
    expect(cards.flashcards.length).toBe(3)
    for (const card of cards.flashcards) expect(sourceText).toContain(card.back)
    const many = yield* Schema.decodeUnknown(FlashcardOutput)(
      (yield* generateWith("s", request("flashcard_generation", { sourceText, count: 50 }))).json
    )
    expect(many.flashcards.length).toBe(5)
    const one = yield* Schema.decodeUnknown(FlashcardOutput)(
      (yield* generateWith("s", request("flashcard_generation", { sourceText: "x", count: 4 }))).json
    )
    expect(one.flashcards.length).toBe(1)

    const good = yield* Schema.decodeUnknown(FeynmanOutput)(
      (yield* generateWith(
        "s",
        request("feynman_evaluation", {
          concept: "Photosynthesis",
          explanation: `Photosynthesis is how plants turn light, water and carbon dioxide into sugar and oxygen. ${
            "The chloroplasts do the work. ".repeat(10)
          } For example, a leaf in sunlight makes glucose.`
        })
      )).json
    )
    const poor = yield* Schema.decodeUnknown(FeynmanOutput)(
      (yield* generateWith(
        "s",
        request("feynman_evaluation", { concept: "Photosynthesis", explanation: "Plants are green." })
      )).json
    )
    expect(good.score).toBeGreaterThan(poor.score)
    expect(poor.gaps.length).toBeGreaterThan(0)
  }))

it.effect("latency runs on Effect's Clock: TestClock drives it", () =>
  Effect.gen(function*() {
    const gateway = yield* AiGateway
    const fiber = yield* Effect.fork(gateway.generate(request("synthetic_echo", { a: 1 })))
    yield* TestClock.adjust("999 millis")
    expect(fiber.unsafePoll()).toBeNull()
    yield* TestClock.adjust("1 millis")
    const result = yield* Fiber.join(fiber)
    expect(result.latencyMs).toBe(1_000)
  }).pipe(Effect.provide(SyntheticGatewayLayer({ seed: "clock", latency: Duration.millis(1_000) }))))

it.effect("latency ranges are sampled per job attempt, reproducibly", () =>
  Effect.gen(function*() {
    const sample = (attemptNo: number) =>
      Effect.gen(function*() {
        const fiber = yield* Effect.fork(
          Effect.flatMap(
            AiGateway,
            (g) =>
              g.generate(request("synthetic_echo", {}, { job: { id: "job-9", type: "synthetic_echo", attemptNo } }))
          )
        )
        yield* TestClock.adjust("1 second")
        return (yield* Fiber.join(fiber)).latencyMs
      }).pipe(
        Effect.provide(
          SyntheticGatewayLayer({ seed: "range", latency: { min: Duration.millis(10), max: Duration.millis(500) } })
        )
      )
    const first = yield* sample(1)
    expect(first).toBeGreaterThanOrEqual(10)
    expect(first).toBeLessThanOrEqual(500)
    expect(yield* sample(1)).toBe(first)
  }))

it.effect("scripted failures, answers and hangs; calls are recorded", () =>
  Effect.gen(function*() {
    const gateway = yield* AiGateway
    const control = yield* SyntheticGatewayControl
    yield* control.script([
      { _tag: "Fail", error: new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: "down" }) },
      {
        _tag: "Fail",
        error: new ProviderError({ code: "PROVIDER_RATE_LIMITED", message: "busy", retryAfterMs: 2_000 })
      },
      { _tag: "RespondText", text: "not json" },
      { _tag: "Respond", json: { flashcards: [] } },
      { _tag: "Hang" }
    ])
    const req = request("flashcard_generation", { sourceText, count: 2 })
    expect(yield* Effect.flip(gateway.generate(req))).toMatchObject({ code: "PROVIDER_UNAVAILABLE" })
    expect(yield* Effect.flip(gateway.generate(req))).toMatchObject({
      code: "PROVIDER_RATE_LIMITED",
      retryAfterMs: 2_000
    })
    expect(yield* Effect.flip(gateway.generate(req))).toMatchObject({ code: "VALIDATION_MALFORMED_JSON" })
    expect((yield* gateway.generate(req)).json).toEqual({ flashcards: [] })
    const hanging = yield* Effect.fork(gateway.generate(req))
    yield* TestClock.adjust("1 hour")
    yield* Fiber.interrupt(hanging)
    expect((yield* gateway.generate(req)).json).toMatchObject({ flashcards: [{}, {}] })
    const calls = yield* control.calls
    expect(calls.map((c) => [c.outcome, c.errorCode])).toEqual([
      ["failed", "PROVIDER_UNAVAILABLE"],
      ["failed", "PROVIDER_RATE_LIMITED"],
      ["failed", "VALIDATION_MALFORMED_JSON"],
      ["succeeded", null],
      ["interrupted", null],
      ["succeeded", null]
    ])
  }).pipe(Effect.provide(SyntheticGatewayLayer({ seed: "script" }))))

it.effect("an injected failure rate is reproducible per seed, job and attempt", () =>
  Effect.gen(function*() {
    const outcomes = (seed: string) =>
      Effect.gen(function*() {
        const gateway = yield* AiGateway
        const results: Array<boolean> = []
        for (let attempt = 1; attempt <= 40; attempt++) {
          const exit = yield* Effect.exit(
            gateway.generate(
              request("synthetic_echo", {}, { job: { id: "job-r", type: "synthetic_echo", attemptNo: attempt } })
            )
          )
          results.push(exit._tag === "Success")
        }
        return results
      }).pipe(Effect.provide(SyntheticGatewayLayer({ seed, failureRate: 0.5 })))
    const a = yield* outcomes("rate")
    expect(yield* outcomes("rate")).toEqual(a)
    expect(a.filter(Boolean).length).toBeGreaterThan(5)
    expect(a.filter((ok) => !ok).length).toBeGreaterThan(5)
  }))

it.effect("usage is estimated from text length", () =>
  Effect.gen(function*() {
    const result = yield* generateWith("u", request("synthetic_echo", { text: "a".repeat(400) }))
    expect(result.usage.completionTokens).toBeGreaterThan(100)
    expect(result.usage.totalTokens).toBe(result.usage.promptTokens + result.usage.completionTokens)
  }))
