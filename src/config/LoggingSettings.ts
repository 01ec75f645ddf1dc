import { Config, Context, Layer, LogLevel } from "effect"

/** `LOG_FORMAT`: `json` (production, log shippers), `logfmt`, or `pretty` (the default, a terminal's). */
export const logFormatConfig = Config.literal("json", "pretty", "logfmt")("LOG_FORMAT").pipe(
  Config.withDefault("pretty")
)

/** `LOG_LEVEL` (default Info): the minimum level written. */
export const logLevelConfig = Config.logLevel("LOG_LEVEL").pipe(Config.withDefault(LogLevel.Info))

export class LoggingSettings extends Context.Tag("ai-job-engine/LoggingSettings")<
  LoggingSettings,
  { readonly format: "json" | "pretty" | "logfmt"; readonly level: LogLevel.LogLevel }
>() {
  static readonly config = Config.all({ format: logFormatConfig, level: logLevelConfig })
  static readonly layer = Layer.effect(LoggingSettings, LoggingSettings.config)
}
