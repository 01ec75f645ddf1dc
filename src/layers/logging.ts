import { Config, Context, Effect, FiberRef, FiberRefs, Inspectable, Layer, Logger, LogLevel, Option, Tracer } from "effect"

/**
 * Logs: `LOG_FORMAT=json` writes one JSON object a line (production, log shippers); anything
 * else, or unset, a readable terminal format. `LOG_LEVEL` (default Info) sets the minimum level.
 * Lines carry the annotations the engine sets (jobId, jobType, stage, attempt, workerId) and
 * never job input, snapshot content, provider output or keys. JSON lines written inside a span
 * carry its `trace_id` and `span_id`, so a log shipper can join them to the trace.
 */
export const logFormatConfig = Config.literal("json", "pretty", "logfmt")("LOG_FORMAT").pipe(Config.withDefault("pretty"))

export const logLevelConfig = Config.logLevel("LOG_LEVEL").pipe(Config.withDefault(LogLevel.Info))

/** The span a log call runs in, if any (a remote parent counts: its ids are the trace's). */
const activeSpan = (context: FiberRefs.FiberRefs): Option.Option<Tracer.AnySpan> =>
  Context.getOption(FiberRefs.getOrDefault(context, FiberRef.currentContext), Tracer.ParentSpan)

/** Effect's JSON line (`Logger.json`'s fields), plus `trace_id` / `span_id` when a span is active. */
export const jsonLoggerWithTrace = Logger.make((options) => {
  const line = Logger.structuredLogger.log(options)
  const span = activeSpan(options.context)
  const message = Array.isArray(line.message) ? line.message.map(errorToJson) : errorToJson(line.message)
  return Inspectable.stringifyCircular(
    Option.match(span, {
      onNone: () => ({ ...line, message }),
      onSome: (s) => ({ ...line, message, trace_id: s.traceId, span_id: s.spanId })
    })
  )
})

const errorToJson = (u: unknown): unknown =>
  u instanceof Error && !("toJSON" in u) ? { ...u, name: u.name, message: u.message } : u

export const LoggingLive = Layer.unwrapEffect(
  Effect.gen(function* () {
    const format = yield* logFormatConfig
    const level = yield* logLevelConfig
    const logger = format === "json"
      ? Logger.replace(Logger.defaultLogger, Logger.withConsoleLog(jsonLoggerWithTrace))
      : format === "logfmt"
      ? Logger.logFmt
      : Logger.pretty
    return Layer.merge(logger, Logger.minimumLogLevel(level))
  })
)
