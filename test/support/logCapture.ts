import { Cause, Context, Effect, HashMap, Inspectable, Layer, List, Logger, LogLevel } from "effect"

/**
 * Captures everything logged (message, annotations, spans and the full cause) as text, at every
 * level, so a suite can assert that no secret or content ever reaches a log.
 */
export class LogCapture extends Context.Tag("test/LogCapture")<
  LogCapture,
  { readonly lines: Effect.Effect<ReadonlyArray<string>>; readonly clear: Effect.Effect<void> }
>() {}

export const LogCaptureLayer = Layer.unwrapEffect(
  Effect.sync(() => {
    const lines: Array<string> = []
    const logger = Logger.make((options) => {
      const annotations = Array.from(HashMap.entries(options.annotations)).map(([key, value]) =>
        `${key}=${Inspectable.toStringUnknown(value)}`
      )
      const spans = List.toArray(options.spans).map((span) => span.label)
      lines.push(
        [
          options.logLevel.label,
          Inspectable.toStringUnknown(options.message),
          annotations.join(" "),
          spans.join(">"),
          Cause.isEmpty(options.cause) ? "" : Cause.pretty(options.cause, { renderErrorCause: true }),
          Logger.logfmtLogger.log(options),
          Inspectable.toStringUnknown(Logger.structuredLogger.log(options))
        ].join(" | ")
      )
    })
    return Layer.mergeAll(
      Logger.replace(Logger.defaultLogger, logger),
      Logger.minimumLogLevel(LogLevel.All),
      Layer.succeed(LogCapture, {
        lines: Effect.sync(() => [...lines]),
        clear: Effect.sync(() => {
          lines.length = 0
        })
      })
    )
  })
)
