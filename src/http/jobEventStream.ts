import { Chunk, Clock, Duration, Effect, Option, Queue, Schedule, Schema, type Scope, Stream } from "effect"
import type { JobEvent } from "../domain/JobEvent.js"
import { isTerminal } from "../domain/LifecycleStatus.js"
import { JobStatusResponse } from "./ApiSchemas.js"
import type { StreamEnd } from "./LiveStreamLimits.js"

/** A comment line this often keeps proxies from closing an idle stream. */
export const sseHeartbeat = Duration.seconds(15)

/** How often a long poll reads the job besides listening for its events (a lost message). */
export const longPollRecheck = Duration.seconds(5)

const encodeStatus = Schema.encodeSync(Schema.parseJson(JobStatusResponse))

/**
 * The event id of a status: its lifecycle state and progress. A client that sends it back as
 * `Last-Event-ID` already has this status; any other id gets the current one again.
 */
export const stateIdOf = (status: JobStatusResponse): string => `${status.lifecycleStatus}.${status.progress}`

export const statusFrame = (status: JobStatusResponse): string =>
  `id: ${stateIdOf(status)}\nevent: status\ndata: ${encodeStatus(status)}\n\n`

export const heartbeatFrame = ": heartbeat\n\n"

/** The last frame of a stream cut short (a comment: clients ignore it; a human reading the stream sees why). */
export const endFrame = (end: StreamEnd): string => `: stream closed (${end.reason}); reconnect with Last-Event-ID\n\n`

interface Step {
  /** The event id last sent (or the client's `Last-Event-ID`). */
  readonly sent: string | undefined
  /** The first read happens at once; each later one waits for an event or a heartbeat. */
  readonly started: boolean
  readonly ended: boolean
}

/**
 * The SSE body of one job (docs/architecture.md §15.5): the status is read at the start, on events
 * and on each heartbeat (covering a lost pub/sub message) and sent when it changed; it ends after
 * the terminal status or at `end`. Subscribe `changes` before this starts, so no change falls
 * before the first read. One loop, not merged streams: an open stream costs a fraction of the memory.
 */
export const jobStatusFrames = <E>(options: {
  readonly changes: Queue.Dequeue<JobEvent>
  readonly read: Effect.Effect<JobStatusResponse, E>
  readonly lastEventId: string | undefined
  readonly heartbeat?: Duration.DurationInput
  readonly end?: StreamEnd
}): Stream.Stream<string> => {
  const heartbeatMillis = Duration.toMillis(options.heartbeat ?? sseHeartbeat)
  const end = options.end
  // An event, then whatever else arrived with it: one read covers them all; or the heartbeat, or the end.
  const nextTrigger = Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const untilEnd = end === undefined ? Number.POSITIVE_INFINITY : end.atMillis - now
    if (untilEnd <= 0) return Effect.succeed("end" as const)
    const wait = Math.min(heartbeatMillis, untilEnd)
    return Queue.take(options.changes).pipe(
      Effect.zipRight(Queue.takeAll(options.changes)),
      Effect.timeoutTo({
        duration: Duration.millis(wait),
        onSuccess: () => "change" as const,
        onTimeout: () => (wait < heartbeatMillis ? "end" as const : "beat" as const)
      })
    )
  })
  const start: Step = { sent: options.lastEventId, started: false, ended: false }
  return Stream.unfoldChunkEffect(start, (previous) =>
    previous.ended
      ? Effect.succeed(Option.none())
      : Effect.gen(function*() {
        const trigger = previous.started ? yield* nextTrigger : "start"
        if (trigger === "end" && end !== undefined) {
          return Option.some([Chunk.of(endFrame(end)), { ...previous, ended: true }] as const)
        }
        const beat = trigger === "beat" ? [heartbeatFrame] : []
        const step = Option.match(yield* Effect.option(options.read), {
          // The store did not answer: try again on the next event or heartbeat.
          onNone: () => ({ sent: previous.sent, frames: beat, terminal: false }),
          onSome: (status) => {
            const id = stateIdOf(status)
            const frames = id === previous.sent ? beat : [statusFrame(status), ...beat]
            return { sent: id, frames, terminal: isTerminal(status.lifecycleStatus) }
          }
        })
        const next: Step = { sent: step.sent, started: true, ended: step.terminal }
        return Option.some([Chunk.unsafeFromArray(step.frames), next] as const)
      }))
}

/**
 * A long poll: the job's status once it is terminal, or when `timeout` passes (whatever it is
 * then). Waits on the job's events, and reads the job every `longPollRecheck` in case one was lost.
 */
export const awaitTerminal = <E>(options: {
  readonly subscribe: Effect.Effect<Queue.Dequeue<JobEvent>, never, Scope.Scope>
  readonly read: Effect.Effect<JobStatusResponse, E>
  readonly timeout: Duration.DurationInput
}): Effect.Effect<JobStatusResponse, E> =>
  Effect.scoped(
    Effect.gen(function*() {
      const changes = yield* options.subscribe
      const ended = Effect.race(
        Effect.repeat(Queue.take(changes), { until: (event) => isTerminal(event.lifecycleStatus) }),
        Effect.repeat(options.read, {
          schedule: Schedule.spaced(longPollRecheck),
          until: (status) => isTerminal(status.lifecycleStatus)
        })
      )
      const now = yield* options.read
      if (!isTerminal(now.lifecycleStatus)) yield* Effect.timeoutOption(ended, options.timeout)
      return yield* options.read
    })
  )
