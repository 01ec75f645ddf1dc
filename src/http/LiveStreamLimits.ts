import { Clock, Duration, Effect, HashMap, Option, Ref, Schema, type Scope } from "effect"
import { ApiSettings } from "../config/ApiSettings.js"
import { TooManyStreamsError } from "./ApiErrors.js"
import { retryAfter } from "./errorMapping.js"

/**
 * The bounds on following jobs live: a stream or long poll holds a slot for as long as it is
 * open, at most `SSE_MAX_PER_USER` per user and `SSE_MAX_PER_PROCESS`
 * in the process (past either: 429 with `Retry-After`), and a stream ends when its token expires
 * or after `SSE_MAX_DURATION_MS`, whichever comes first.
 */

export class TooManyLiveStreams extends Schema.TaggedError<TooManyLiveStreams>()("TooManyLiveStreams", {
  cap: Schema.Literal("user", "process"),
  limit: Schema.Number
}) {}

/** Seconds a refused client waits before trying again. */
const liveStreamRetryAfterSeconds = 5

/** A cap reached is logged at most this often per cap; the next line counts the refusals in between. */
const refusalLogIntervalMillis = 10_000

/** When and why a stream ends if its job has not ended first. */
export interface StreamEnd {
  readonly atMillis: number
  readonly reason: "token expired" | "SSE_MAX_DURATION_MS reached"
}

interface Slots {
  readonly total: number
  readonly perUser: HashMap.HashMap<string, number>
}

interface RefusalLog {
  readonly lastLoggedAtMillis: number
  readonly refusedSince: number
}

type RefusalLogs = Readonly<Record<TooManyLiveStreams["cap"], RefusalLog>>

export class LiveStreamLimits extends Effect.Service<LiveStreamLimits>()("ai-job-engine/http/LiveStreamLimits", {
  effect: Effect.gen(function*() {
    const { liveStreams } = yield* ApiSettings
    const maxDurationMillis = Duration.toMillis(liveStreams.maxDuration)
    const slots = yield* Ref.make<Slots>({ total: 0, perUser: HashMap.empty() })
    const quiet: RefusalLog = { lastLoggedAtMillis: Number.NEGATIVE_INFINITY, refusedSince: 0 }
    const refusals = yield* Ref.make<RefusalLogs>({ user: quiet, process: quiet })

    const take = (userId: string) =>
      Ref.modify(slots, (current): readonly [Option.Option<TooManyLiveStreams>, Slots] => {
        const mine = Option.getOrElse(HashMap.get(current.perUser, userId), () => 0)
        if (mine >= liveStreams.maxPerUser) {
          return [Option.some(new TooManyLiveStreams({ cap: "user", limit: liveStreams.maxPerUser })), current]
        }
        if (current.total >= liveStreams.maxPerProcess) {
          return [Option.some(new TooManyLiveStreams({ cap: "process", limit: liveStreams.maxPerProcess })), current]
        }
        return [Option.none(), { total: current.total + 1, perUser: HashMap.set(current.perUser, userId, mine + 1) }]
      })

    const give = (userId: string) =>
      Ref.update(slots, (current) => {
        const mine = Option.getOrElse(HashMap.get(current.perUser, userId), () => 1)
        return {
          total: current.total - 1,
          perUser: mine <= 1 ? HashMap.remove(current.perUser, userId) : HashMap.set(current.perUser, userId, mine - 1)
        }
      })

    const logRefusal = (refused: TooManyLiveStreams, userId: string) =>
      Effect.flatMap(
        Clock.currentTimeMillis,
        (now) =>
          Ref.modify(refusals, (log): readonly [Option.Option<number>, RefusalLogs] => {
            const entry = log[refused.cap]
            return now - entry.lastLoggedAtMillis >= refusalLogIntervalMillis
              ? [Option.some(entry.refusedSince), {
                ...log,
                [refused.cap]: { lastLoggedAtMillis: now, refusedSince: 0 }
              }]
              : [Option.none(), { ...log, [refused.cap]: { ...entry, refusedSince: entry.refusedSince + 1 } }]
          })
      ).pipe(
        Effect.flatMap(Option.match({
          onNone: () => Effect.void,
          onSome: (refusedBefore) =>
            Effect.logWarning(
              `live stream refused: the ${refused.cap === "user" ? "per-user" : "per-process"} cap is reached`
            ).pipe(
              Effect.annotateLogs({
                cap: refused.cap === "user" ? "SSE_MAX_PER_USER" : "SSE_MAX_PER_PROCESS",
                limit: refused.limit,
                userId,
                alsoRefusedSinceLastLine: refusedBefore
              })
            )
        }))
      )

    /** A slot for the caller's scope (the request's: released when the answer is done), or `TooManyLiveStreams`. */
    const reserve = (userId: string): Effect.Effect<void, TooManyLiveStreams, Scope.Scope> =>
      Effect.acquireRelease(
        Effect.flatMap(
          take(userId),
          Option.match({
            onNone: () => Effect.void,
            onSome: (refused) => Effect.zipRight(logRefusal(refused, userId), Effect.fail(refused))
          })
        ),
        () => give(userId)
      )

    /** Where a stream opened now by a token expiring at `tokenExpiresAtMillis` ends. */
    const streamEnd = (tokenExpiresAtMillis: number): Effect.Effect<StreamEnd> =>
      Effect.map(Clock.currentTimeMillis, (now): StreamEnd =>
        tokenExpiresAtMillis <= now + maxDurationMillis
          ? { atMillis: tokenExpiresAtMillis, reason: "token expired" }
          : { atMillis: now + maxDurationMillis, reason: "SSE_MAX_DURATION_MS reached" })

    return { reserve, streamEnd }
  })
}) {}

/** 429 `TOO_MANY_STREAMS` with `Retry-After`. */
export const fromTooManyLiveStreams = (refused: TooManyLiveStreams) =>
  retryAfter(liveStreamRetryAfterSeconds).pipe(
    Effect.zipRight(
      Effect.fail(
        new TooManyStreamsError({
          message: refused.cap === "user"
            ? `You have ${refused.limit} live streams and long polls open, the most allowed. Close one, then retry.`
            : "This server holds as many live streams as it allows. Retry shortly."
        })
      )
    )
  )
