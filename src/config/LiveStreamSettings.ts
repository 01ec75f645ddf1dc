import { Config, Duration } from "effect"
import { positiveMillisDuration, positiveWhole } from "./configValues.js"

/**
 * Bounds on the connections that follow a job (the SSE stream and the long poll): each holds a
 * socket, a file descriptor and a subscription for as long as it lasts, so one caller must not
 * be able to hold them all. Counted per API process.
 */
export interface LiveStreamSettings {
  /** `SSE_MAX_PER_USER`: streams and long polls one user may hold open at once (429 past it). */
  readonly maxPerUser: number
  /** `SSE_MAX_PER_PROCESS`: streams and long polls open at once in this process (429 past it); keep it well under `ulimit -n`. */
  readonly maxPerProcess: number
  /** `SSE_MAX_DURATION_MS`: a stream is closed after this long (the client reconnects with `Last-Event-ID`). */
  readonly maxDuration: Duration.Duration
}

export const defaultLiveStreams: LiveStreamSettings = {
  maxPerUser: 32,
  maxPerProcess: 500,
  maxDuration: Duration.minutes(30)
}

export const liveStreamConfig: Config.Config<LiveStreamSettings> = Config.all({
  maxPerUser: positiveWhole("SSE_MAX_PER_USER", defaultLiveStreams.maxPerUser),
  maxPerProcess: positiveWhole("SSE_MAX_PER_PROCESS", defaultLiveStreams.maxPerProcess),
  maxDuration: positiveMillisDuration("SSE_MAX_DURATION_MS", defaultLiveStreams.maxDuration)
})
