import { FetchHttpClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Clock, Duration, Effect, Either, FiberSet, Option, Random, Redacted, Schema } from "effect"
import { signToken } from "../src/http/AuthTokens.js"

/**
 * The clients: jobs created over HTTP at a steady rate, spread over the APIs, each with its own
 * Idempotency-Key that every retry repeats (after a 503, a refused connection or a timeout, on
 * whichever API answers), and a share of them cancelled a moment later (a cancel racing the
 * dispatch, the lock or the projection).
 */

export interface LoadSettings {
  readonly apiUrls: ReadonlyArray<string>
  readonly jwtSecret: string
  readonly seed: number
  readonly ratePerSecond: number
  readonly duration: Duration.Duration
  readonly users: number
  readonly cancelShare: number
  /** How long one create (or cancel) keeps retrying before the client gives up. */
  readonly patience: Duration.Duration
}

export interface LoadStats {
  /** Keys a create was sent for. */
  requested: number
  /** Job ids a create answered 200/202 for. */
  readonly acknowledged: Array<string>
  requests: number
  retried503: number
  retriedTransport: number
  /** 5xx answers other than 503 (what was asked, the status). */
  readonly serverErrors: Array<string>
  /** 4xx answers a well-behaved client should never get. */
  readonly unexpected: Array<string>
  gaveUp: number
  cancelsSent: number
  cancelsAccepted: number
  /** Jobs whose one cancel answered 409 with no earlier attempt that may have reached the server. */
  readonly cancelRefused: Array<string>
  /** Every create request: when it was sent (epoch ms), how long its answer took, and what it was. */
  readonly createRequests: Array<TimedRequest>
}

/** One request as the client saw it. */
export interface TimedRequest {
  /** The API it was sent to. */
  readonly apiUrl: string
  readonly sentAtMs: number
  readonly ms: number
  /** The status, or `TimedOut` / `Refused`. */
  readonly answer: string
}

/**
 * The requests sent while Redis was paused (epoch ms, `toMs` excluded) to an API that served
 * all along: one held by its own API being stopped or restarted meanwhile is that fault's.
 */
export const sentWhileRedisPaused = (
  requests: ReadonlyArray<TimedRequest>,
  pauses: ReadonlyArray<{ readonly fromMs: number; readonly toMs: number }>,
  apiOutages: ReadonlyArray<{ readonly apiUrl: string; readonly fromMs: number; readonly toMs: number }>
): ReadonlyArray<TimedRequest> =>
  requests.filter((request) =>
    pauses.some((pause) => request.sentAtMs >= pause.fromMs && request.sentAtMs < pause.toMs) &&
    !apiOutages.some((outage) =>
      outage.apiUrl === request.apiUrl && outage.fromMs <= request.sentAtMs + request.ms &&
      outage.toMs >= request.sentAtMs
    )
  )

const JobAnswer = Schema.parseJson(Schema.Struct({ jobId: Schema.String }))
const decodeJob = Schema.decodeUnknownEither(JobAnswer)

type Outcome =
  | {
    readonly _tag: "Answered"
    readonly status: number
    readonly body: string
    readonly retryAfterMs: number | undefined
  }
  | { readonly _tag: "Refused" } // the connection failed: the request never reached a handler
  | { readonly _tag: "TimedOut" } // no answer in time: the request may have run

export const runLoad = (settings: LoadSettings) =>
  Effect.gen(function*() {
    const http = yield* HttpClient.HttpClient
    const stats: LoadStats = {
      requested: 0,
      acknowledged: [],
      requests: 0,
      retried503: 0,
      retriedTransport: 0,
      serverErrors: [],
      unexpected: [],
      gaveUp: 0,
      cancelsSent: 0,
      cancelsAccepted: 0,
      cancelRefused: [],
      createRequests: []
    }
    const tokens = yield* Effect.forEach(
      Array.from({ length: settings.users }, (_, i) => `chaos-user-${i + 1}`),
      (user) => signToken({ sub: user, role: "USER", expiresInSeconds: 3600 }, Redacted.make(settings.jwtSecret))
    )

    const send = (request: HttpClientRequest.HttpClientRequest): Effect.Effect<Outcome> =>
      http.execute(request).pipe(
        Effect.flatMap((response) =>
          Effect.map(response.text, (body): Outcome => {
            const retryAfter = Number(response.headers["retry-after"])
            return {
              _tag: "Answered",
              status: response.status,
              body,
              retryAfterMs: Number.isFinite(retryAfter) ? retryAfter * 1000 : undefined
            }
          })
        ),
        Effect.scoped,
        Effect.timeout(Duration.seconds(5)),
        Effect.catchAll((error): Effect.Effect<Outcome> =>
          Effect.succeed(error._tag === "TimeoutException" ? { _tag: "TimedOut" } : { _tag: "Refused" })
        ),
        Effect.tap(() => Effect.sync(() => void stats.requests++))
      )

    /** Sends `build(api)` on API after API until `settle` accepts an outcome or the patience runs out. */
    const persist = <A>(
      first: number,
      build: (apiUrl: string) => HttpClientRequest.HttpClientRequest,
      settle: (outcome: Outcome, ambiguousBefore: boolean) => Option.Option<A>,
      onAnswer: (request: TimedRequest) => void = () => {}
    ) =>
      Effect.gen(function*() {
        const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(settings.patience)
        let ambiguous = false
        for (let attempt = 0;; attempt++) {
          const apiUrl = settings.apiUrls[(first + attempt) % settings.apiUrls.length] ?? ""
          const sentAtMs = yield* Clock.currentTimeMillis
          const outcome = yield* send(build(apiUrl))
          onAnswer({
            apiUrl,
            sentAtMs,
            ms: (yield* Clock.currentTimeMillis) - sentAtMs,
            answer: outcome._tag === "Answered" ? String(outcome.status) : outcome._tag
          })
          const done = settle(outcome, ambiguous)
          if (Option.isSome(done)) return done
          if (outcome._tag === "TimedOut") ambiguous = true
          if ((yield* Clock.currentTimeMillis) > deadline) return Option.none<A>()
          const pause = outcome._tag === "Answered" ? Math.min(outcome.retryAfterMs ?? 500, 2_000) : 250
          yield* Effect.sleep(Duration.millis(pause))
        }
      })

    const retryable = (what: string, outcome: Outcome) => {
      if (outcome._tag !== "Answered") {
        stats.retriedTransport++
        return true
      }
      if (outcome.status === 503) {
        stats.retried503++
        return true
      }
      if (outcome.status >= 500) {
        stats.serverErrors.push(`${what}: ${outcome.status}`)
        return true
      }
      return false
    }

    const cancel = (jobId: string, token: string, first: number) =>
      Effect.gen(function*() {
        yield* Effect.sleep(Duration.millis(yield* Random.nextIntBetween(0, 2_500)))
        stats.cancelsSent++
        yield* persist(
          first,
          (apiUrl) =>
            HttpClientRequest.post(`${apiUrl}/api/ai/jobs/${jobId}/cancel`).pipe(HttpClientRequest.bearerToken(token)),
          (outcome, ambiguousBefore) => {
            if (retryable("cancel", outcome) || outcome._tag !== "Answered") return Option.none()
            if (outcome.status === 200 || outcome.status === 202) stats.cancelsAccepted++
            else if (outcome.status === 409) {
              if (!ambiguousBefore) stats.cancelRefused.push(jobId)
            } else stats.unexpected.push(`cancel: ${outcome.status}`)
            return Option.some(outcome.status)
          }
        )
      })

    const create = (index: number, cancels: FiberSet.FiberSet) =>
      Effect.gen(function*() {
        const token = tokens[index % tokens.length] ?? ""
        const flashcards = (yield* Random.nextIntBetween(0, 2)) === 0
        const body = flashcards
          ? {
            sourceText: `Chaos text ${index}: light becomes chemical energy. Plants release oxygen. Roots take water.`,
            count: yield* Random.nextIntBetween(1, 4)
          }
          : {
            concept: `concept ${index}`,
            explanation: "Energy is conserved: it changes form but the total stays the same."
          }
        const path = flashcards ? "flashcard-generations" : "feynman-evaluations"
        const key = `chaos-${settings.seed}-${index}`
        const cancelIt = (yield* Random.next) < settings.cancelShare
        stats.requested++
        const jobId = yield* persist(
          index,
          (apiUrl) =>
            HttpClientRequest.post(`${apiUrl}/api/ai/${path}`).pipe(
              HttpClientRequest.bearerToken(token),
              HttpClientRequest.setHeader("idempotency-key", key),
              HttpClientRequest.bodyUnsafeJson(body)
            ),
          (outcome) => {
            if (retryable("create", outcome) || outcome._tag !== "Answered") return Option.none()
            if (outcome.status === 200 || outcome.status === 202) {
              return Either.match(decodeJob(outcome.body), {
                onLeft: () => {
                  stats.unexpected.push(`create: ${outcome.status} without a job id`)
                  return Option.some(Option.none<string>())
                },
                onRight: (job) => Option.some(Option.some(job.jobId))
              })
            }
            stats.unexpected.push(`create: ${outcome.status} ${outcome.body.slice(0, 120)}`)
            return Option.some(Option.none<string>())
          },
          (request) => void stats.createRequests.push(request)
        )
        if (Option.isNone(jobId)) {
          stats.gaveUp++
          return
        }
        if (Option.isSome(jobId.value)) {
          stats.acknowledged.push(jobId.value.value)
          if (cancelIt) yield* FiberSet.run(cancels, cancel(jobId.value.value, token, index + 1))
        }
      })

    yield* Effect.scoped(
      Effect.gen(function*() {
        const inFlight = yield* FiberSet.make()
        const total = Math.round(settings.ratePerSecond * Duration.toSeconds(settings.duration))
        const interval = Duration.millis(1000 / settings.ratePerSecond)
        for (let index = 0; index < total; index++) {
          yield* FiberSet.run(inFlight, create(index, inFlight))
          yield* Effect.sleep(interval)
        }
        yield* FiberSet.awaitEmpty(inFlight)
      })
    )
    return stats
  }).pipe(Effect.withRandom(Random.make(`load:${settings.seed}`)), Effect.provide(FetchHttpClient.layer))
