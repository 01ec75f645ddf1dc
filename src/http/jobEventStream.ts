import { Duration, Effect, Option, Schedule, Schema, type Scope, Stream } from "effect"
import { isTerminal } from "../domain/LifecycleStatus.js"
import type { JobEvent } from "../domain/JobEvent.js"
import { JobStatusResponse } from "./ApiSchemas.js"

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

interface Step {
  readonly sent: string | undefined
  readonly frames: ReadonlyArray<string>
  readonly terminal: boolean
}

/**
 * The SSE body of one job (docs/architecture.md §15.5): the job's status read again at the start,
 * on each of its events and on each heartbeat (which also covers a pub/sub message that was lost),
 * sent whenever it differs from the last one sent; it ends after the terminal status. `changes`
 * must be subscribed before this stream starts, so no change falls between it and the first read.
 */
export const jobStatusFrames = <E>(options: {
  readonly changes: Stream.Stream<JobEvent>
  readonly read: Effect.Effect<JobStatusResponse, E>
  readonly lastEventId: string | undefined
  readonly heartbeat?: Duration.DurationInput
}): Stream.Stream<string> => {
  const beats = Stream.fromSchedule(Schedule.spaced(options.heartbeat ?? sseHeartbeat)).pipe(Stream.as("beat" as const))
  const triggers = Stream.concat(
    Stream.make("start" as const),
    Stream.merge(Stream.as(options.changes, "change" as const), beats, { haltStrategy: "left" })
  )
  const start: Step = { sent: options.lastEventId, frames: [], terminal: false }
  return triggers.pipe(
    Stream.mapAccumEffect(start, (previous, trigger) =>
      Effect.map(Effect.option(options.read), (read): readonly [Step, Step] => {
        const beat = trigger === "beat" ? [heartbeatFrame] : []
        const step: Step = Option.match(read, {
          // The store did not answer: try again on the next event or heartbeat.
          onNone: () => ({ sent: previous.sent, frames: beat, terminal: false }),
          onSome: (status) => {
            const id = stateIdOf(status)
            const frames = id === previous.sent ? beat : [statusFrame(status), ...beat]
            return { sent: id, frames, terminal: isTerminal(status.lifecycleStatus) }
          }
        })
        return [step, step]
      })),
    Stream.takeUntil((step) => step.terminal),
    Stream.flatMap((step) => Stream.fromIterable(step.frames))
  )
}

/**
 * A long poll: the job's status once it is terminal, or when `timeout` passes (whatever it is
 * then). Waits on the job's events, and reads the job every `longPollRecheck` in case one was lost.
 */
export const awaitTerminal = <E>(options: {
  readonly subscribe: Effect.Effect<Stream.Stream<JobEvent>, never, Scope.Scope>
  readonly read: Effect.Effect<JobStatusResponse, E>
  readonly timeout: Duration.DurationInput
}): Effect.Effect<JobStatusResponse, E> =>
  Effect.scoped(
    Effect.gen(function* () {
      const changes = yield* options.subscribe
      const ended = Effect.race(
        Stream.runHead(Stream.filter(changes, (event) => isTerminal(event.lifecycleStatus))),
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
