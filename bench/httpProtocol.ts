import { Schema } from "effect"

export const HttpServerMode = Schema.Literal("engine", "platform", "bare")
export type HttpServerMode = typeof HttpServerMode.Type

/** What the HTTP server child is started with (argv[2], JSON). */
export const HttpServerArgs = Schema.Struct({
  mode: HttpServerMode,
  target: Schema.Struct({
    databaseName: Schema.String,
    databaseUrl: Schema.String,
    redisUrl: Schema.String,
    redisPrefix: Schema.String
  }),
  /** `engine` only: also accept tokens of this identity provider (bench:auth). */
  identityProvider: Schema.optional(Schema.Struct({ issuer: Schema.String, audience: Schema.String })),
  /** `engine` only: the caps on live streams (bench:sse); the defaults otherwise. */
  liveStreams: Schema.optional(Schema.Struct({ maxPerUser: Schema.Number, maxPerProcess: Schema.Number }))
})
export type HttpServerArgs = typeof HttpServerArgs.Type

/** Child → parent. */
export const HttpServerReady = Schema.Struct({ type: Schema.Literal("listening"), port: Schema.Number })
export type HttpServerReady = typeof HttpServerReady.Type

/** Parent → child: stop, or report the process's memory (answered with a `MemoryReading`). */
export const HttpServerCommand = Schema.Union(
  Schema.Struct({ type: Schema.Literal("stop") }),
  Schema.Struct({ type: Schema.Literal("measure"), label: Schema.String })
)
