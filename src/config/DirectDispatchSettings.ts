import { Config, Context, Duration, Layer } from "effect"
import { positiveMillisDuration, positiveWhole } from "./configValues.js"

/** docs/architecture.md §6.7: the creating process queues its own jobs; the dispatcher is the safety net. */
export interface DirectDispatchSettingsShape {
  /**
   * Whether the creating process adds its jobs to the queue at all (`OUTBOX_DIRECT_PUBLISH`):
   * off, it never touches the Redis queues and the dispatcher publishes every event.
   */
  readonly enabled: boolean
  /**
   * How long a new job's outbox event waits before a dispatcher may take it (`OUTBOX_DIRECT_GRACE_MS`):
   * the creator's own add normally lands well within it; after a crash between commit and add, the sweep does it.
   */
  readonly grace: Duration.Duration
  /**
   * How long a create waits for its own queue add (`OUTBOX_DIRECT_ADD_TIMEOUT_MS`, default 1 s):
   * past it the create answers anyway, the job committed, and a dispatcher sweeps the event after
   * the grace. A paused Redis holds a create this long at most.
   */
  readonly addTimeout: Duration.Duration
  /** How long published marks gather before one UPDATE writes them all (`OUTBOX_DIRECT_FLUSH_MS`). */
  readonly flushDelay: Duration.Duration
  /** At most this many events per published mark. */
  readonly batchSize: number
}

export class DirectDispatchSettings extends Context.Tag("ai-job-engine/DirectDispatchSettings")<
  DirectDispatchSettings,
  DirectDispatchSettingsShape
>() {
  static readonly config = Config.all({
    enabled: Config.boolean("OUTBOX_DIRECT_PUBLISH").pipe(Config.withDefault(true)),
    grace: positiveMillisDuration("OUTBOX_DIRECT_GRACE_MS", Duration.seconds(5)),
    addTimeout: positiveMillisDuration("OUTBOX_DIRECT_ADD_TIMEOUT_MS", Duration.seconds(1)),
    flushDelay: positiveMillisDuration("OUTBOX_DIRECT_FLUSH_MS", Duration.seconds(1)),
    batchSize: positiveWhole("OUTBOX_DIRECT_BATCH_SIZE", 500)
  })
  static readonly layer = Layer.effect(DirectDispatchSettings, DirectDispatchSettings.config)
}
