import { Cause, Context, Duration, Effect, Layer, Option, Random, Ref } from "effect"
import { SyntheticGatewaySettings } from "../../config/SyntheticGatewaySettings.js"
import { canonicalJson, sha256Hex } from "../../domain/CanonicalJson.js"
import { ProviderError, ValidationError } from "../../domain/ExecutionError.js"
import { AiGateway, type GatewayError, type GenerateRequest, type GenerateResult } from "../../services/AiGateway.js"
import { defaultSyntheticResponders, echoResponder, type SyntheticResponder } from "./syntheticResponders.js"

/** One scripted answer: the next call consumes the first step of the script. */
export type SyntheticStep =
  | { readonly _tag: "Fail"; readonly error: GatewayError }
  /** Answer with this JSON instead of the responder's (e.g. output that breaks the Schema). */
  | { readonly _tag: "Respond"; readonly json: unknown }
  /** Answer with this message text (e.g. text that is not JSON: `VALIDATION_MALFORMED_JSON`). */
  | { readonly _tag: "RespondText"; readonly text: string }
  /** Wait this long before the normal answer. */
  | { readonly _tag: "Delay"; readonly duration: Duration.Duration }
  /** Never answer (until interrupted). */
  | { readonly _tag: "Hang" }

export interface SyntheticCall {
  readonly jobId: string
  readonly jobType: string
  readonly attemptNo: number
  readonly model: string
  readonly credentialMode: string
  readonly outcome: "succeeded" | "failed" | "interrupted"
  readonly errorCode: string | null
}

export interface SyntheticGatewayOptions {
  /** Same seed and same input: same output (and same latency and injected failures per job attempt). */
  readonly seed: string
  /** A fixed latency or a range sampled per call; slept on Effect's Clock (TestClock drives it). Default 0. */
  readonly latency?: Duration.Duration | { readonly min: Duration.Duration; readonly max: Duration.Duration }
  /** The chance (0..1) that a call fails with PROVIDER_UNAVAILABLE, decided by seed + job id + attempt. */
  readonly failureRate?: number
  readonly responders?: Readonly<Record<string, SyntheticResponder>>
}

/** Steers and observes the synthetic provider in tests and simulations. */
export class SyntheticGatewayControl extends Context.Tag("ai-job-engine/SyntheticGatewayControl")<
  SyntheticGatewayControl,
  {
    /** Appends steps; each call takes the first remaining one, then behaves normally. */
    readonly script: (steps: ReadonlyArray<SyntheticStep>) => Effect.Effect<void>
    readonly calls: Effect.Effect<ReadonlyArray<SyntheticCall>>
    readonly reset: Effect.Effect<void>
  }
>() {}

/** A deterministic generator for one purpose of one call. */
const randomFor = (...parts: ReadonlyArray<string | number>) => Random.make(sha256Hex(parts.join("\u0000")))

/** Which call of a job a request is: its number, and the lease it runs in when one is named. */
const callOf = (request: GenerateRequest): ReadonlyArray<number> =>
  request.job.leaseNo === undefined ? [request.job.attemptNo] : [request.job.leaseNo, request.job.attemptNo]

/** How many calls `SyntheticGatewayControl.calls` remembers. */
const maxRecordedCalls = 1_000

const estimateTokens = (text: string) => Math.max(1, Math.ceil(text.length / 4))

export const makeSyntheticGateway = (options: SyntheticGatewayOptions) =>
  Effect.gen(function*() {
    const responders = { ...defaultSyntheticResponders, ...options.responders }
    const steps = yield* Ref.make<ReadonlyArray<SyntheticStep>>([])
    const calls = yield* Ref.make<ReadonlyArray<SyntheticCall>>([])

    const nextStep = Ref.modify(steps, (all): readonly [Option.Option<SyntheticStep>, ReadonlyArray<SyntheticStep>] =>
      all.length === 0 ? [Option.none(), all] : [Option.fromNullable(all[0]), all.slice(1)])

    /** In whole milliseconds: a range is sampled as an integer, and the answer reports it. */
    const latencyOf = (request: GenerateRequest) => {
      const latency = options.latency ?? Duration.zero
      if (Duration.isDuration(latency)) {
        return Effect.succeed(Duration.toMillis(latency))
      }
      return randomFor(options.seed, "latency", request.job.id, ...callOf(request)).nextIntBetween(
        Duration.toMillis(latency.min),
        Duration.toMillis(latency.max) + 1
      )
    }

    const injectedFailure = (request: GenerateRequest) =>
      Effect.gen(function*() {
        const rate = options.failureRate ?? 0
        if (rate <= 0) {
          return Option.none<GatewayError>()
        }
        const roll = yield* randomFor(options.seed, "failure", request.job.id, ...callOf(request)).next
        return roll < rate
          ? Option.some<GatewayError>(
            new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: "synthetic provider: injected failure" })
          )
          : Option.none<GatewayError>()
      })

    const answer = (request: GenerateRequest, override: Option.Option<SyntheticStep>, latencyMs: number) =>
      Effect.gen(function*() {
        const inputText = canonicalJson(request.input ?? null)
        let text: string
        if (Option.isSome(override) && override.value._tag === "RespondText") {
          text = override.value.text
        } else if (Option.isSome(override) && override.value._tag === "Respond") {
          text = JSON.stringify(override.value.json)
        } else {
          const responder = responders[request.job.type] ?? echoResponder
          const random = randomFor(options.seed, request.job.type, inputText)
          let state = (yield* random.nextInt) | 1
          // A tiny xorshift on the seeded start keeps `pick` synchronous for responders.
          const pick = (n: number) => {
            state ^= state << 13
            state ^= state >>> 17
            state ^= state << 5
            return n <= 0 ? 0 : Math.abs(state) % n
          }
          text = JSON.stringify(responder(request.input, pick))
        }
        let json: unknown = null
        if (request.jsonMode) {
          try {
            json = JSON.parse(text)
          } catch {
            return yield* new ValidationError({
              code: "VALIDATION_MALFORMED_JSON",
              message: `synthetic provider: message content (${text.length} chars) is not valid JSON`,
              problems: ["The answer was not valid JSON: reply with one JSON object and no other text."]
            })
          }
        }
        const promptTokens = estimateTokens(
          request.messages.map((m) =>
            m.content
          ).join("\n")
        )
        const completionTokens = estimateTokens(text)
        return {
          text,
          json,
          usage: { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens },
          provider: request.provider,
          model: request.model,
          latencyMs,
          finishReason: "stop"
        } satisfies GenerateResult
      })

    const record = (request: GenerateRequest, outcome: SyntheticCall["outcome"], errorCode: string | null) =>
      Ref.update(calls, (all) => [
        // A long-running embedded process keeps only the most recent calls.
        ...(all.length >= maxRecordedCalls ? all.slice(all.length - maxRecordedCalls + 1) : all),
        {
          jobId: request.job.id,
          jobType: request.job.type,
          attemptNo: request.job.attemptNo,
          model: request.model,
          credentialMode: request.credential.mode,
          outcome,
          errorCode
        }
      ])

    const generate = (request: GenerateRequest): Effect.Effect<GenerateResult, GatewayError> =>
      Effect.gen(function*() {
        const step = yield* nextStep
        let latencyMs = yield* latencyOf(request)
        if (Option.isSome(step) && step.value._tag === "Delay") latencyMs = Duration.toMillis(step.value.duration)
        if (Option.isSome(step) && step.value._tag === "Hang") return yield* Effect.never
        if (latencyMs > 0) yield* Effect.sleep(latencyMs)
        if (Option.isSome(step) && step.value._tag === "Fail") return yield* Effect.fail(step.value.error)
        const injected = yield* injectedFailure(request)
        if (Option.isSome(injected)) return yield* Effect.fail(injected.value)
        return yield* answer(request, step, latencyMs)
      }).pipe(
        Effect.onExit((exit) =>
          exit._tag === "Success"
            ? record(request, "succeeded", null)
            : Cause.isInterruptedOnly(exit.cause)
            ? record(request, "interrupted", null)
            : record(
              request,
              "failed",
              Option.getOrNull(Option.map(Cause.failureOption(exit.cause), (error) => error.code))
            )
        )
      )

    const gateway = AiGateway.of({ generate })
    const control = SyntheticGatewayControl.of({
      script: (more) => Ref.update(steps, (all) => [...all, ...more]),
      calls: Ref.get(calls),
      reset: Effect.zipRight(Ref.set(steps, []), Ref.set(calls, []))
    })
    return { gateway, control }
  })

/** The synthetic provider and its control, for explicit options. */
export const SyntheticGatewayLayer = (options: SyntheticGatewayOptions) =>
  Layer.effectContext(
    Effect.map(makeSyntheticGateway(options), ({ control, gateway }) =>
      Context.make(AiGateway, gateway).pipe(Context.add(SyntheticGatewayControl, control)))
  )

/** The synthetic gateway as `SyntheticGatewaySettings` (the environment's, by default) describe it. */
export const SyntheticGatewayLive = Layer.unwrapEffect(
  Effect.map(SyntheticGatewaySettings, ({ failureRate, latency, seed }) =>
    SyntheticGatewayLayer({
      seed,
      failureRate,
      latency
    }))
).pipe(Layer.provide(SyntheticGatewaySettings.layer))
