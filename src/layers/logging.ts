import { Config, Effect, Layer, Logger, LogLevel } from "effect"

/**
 * Logs: `LOG_FORMAT=json` writes one JSON object a line (production, log shippers); anything
 * else, or unset, a readable terminal format. `LOG_LEVEL` (default Info) sets the minimum level.
 * Lines carry the annotations the engine sets (jobId, jobType, stage, attempt, workerId) and
 * never job input, snapshot content, provider output or keys.
 */
export const logFormatConfig = Config.literal("json", "pretty", "logfmt")("LOG_FORMAT").pipe(Config.withDefault("pretty"))

export const logLevelConfig = Config.logLevel("LOG_LEVEL").pipe(Config.withDefault(LogLevel.Info))

export const LoggingLive = Layer.unwrapEffect(
  Effect.gen(function* () {
    const format = yield* logFormatConfig
    const level = yield* logLevelConfig
    const logger = format === "json" ? Logger.json : format === "logfmt" ? Logger.logFmt : Logger.pretty
    return Layer.merge(logger, Logger.minimumLogLevel(level))
  })
)
