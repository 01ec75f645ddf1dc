import { Schema } from "effect"

/** What the memory worker child is started with (argv[2], JSON). */
export const MemoryWorkerArgs = Schema.Struct({
  target: Schema.Struct({
    databaseName: Schema.String,
    databaseUrl: Schema.String,
    redisUrl: Schema.String,
    redisPrefix: Schema.String
  }),
  concurrency: Schema.Number
})

/** Parent → child. */
export const MemoryCommand = Schema.Union(
  Schema.Struct({ type: Schema.Literal("measure"), label: Schema.String }),
  Schema.Struct({ type: Schema.Literal("stop") })
)

/** Child → parent: one memory reading, after GC. */
export const MemoryReading = Schema.Struct({
  type: Schema.Literal("memory"),
  label: Schema.String,
  rssBytes: Schema.Number,
  heapUsedBytes: Schema.Number,
  heapTotalBytes: Schema.Number,
  externalBytes: Schema.Number,
  gcExposed: Schema.Boolean
})
export type MemoryReading = typeof MemoryReading.Type
