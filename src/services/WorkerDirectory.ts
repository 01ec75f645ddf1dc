import { Context, type Effect, Schema } from "effect"

/** What a live worker says about itself in its heartbeat (`worker:heartbeat:{instanceId}`). */
export const WorkerHeartbeat = Schema.Struct({
  instanceId: Schema.String,
  hostname: Schema.String,
  pid: Schema.Number,
  queues: Schema.Array(Schema.String),
  jobIds: Schema.Array(Schema.String),
  startedAt: Schema.String,
  beatAt: Schema.String
})
export type WorkerHeartbeat = typeof WorkerHeartbeat.Type

/** Which workers are alive: each refreshes its entry; an entry not refreshed for 90 s is gone. */
export class WorkerDirectory extends Context.Tag("ai-job-engine/WorkerDirectory")<
  WorkerDirectory,
  {
    readonly beat: (heartbeat: WorkerHeartbeat) => Effect.Effect<void>
    readonly remove: (instanceId: string) => Effect.Effect<void>
    readonly live: Effect.Effect<ReadonlyArray<WorkerHeartbeat>>
  }
>() {}
