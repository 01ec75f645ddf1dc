import { Console, Context, Effect, FiberRef, FiberRefs, Inspectable, Layer, Logger, Option, Tracer } from "effect"
import { LoggingSettings } from "../config/LoggingSettings.js"

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

/**
 * How long a production-format line may wait to be written with the lines after it. One write of
 * stdout is a system call; one per line cost a worker a few per job (3.5 % of its CPU at 50 jobs/s).
 * A process that is killed outright loses at most this much of its last lines; one that stops
 * writes them all, its layers' last lines included.
 */
export const logBatchWindow = "50 millis"

/** `lines` to stdout, one write for the lot: each line stays whole, in order. */
const writeLines = (lines: ReadonlyArray<string>) => Console.log(lines.join("\n"))

/** The production formats, batched: the lines of a window go out in one write. */
const batchedToStdout = (format: Logger.Logger<unknown, string>) =>
  Logger.replaceScoped(Logger.defaultLogger, Logger.batched(format, logBatchWindow, writeLines))

/**
 * Logs: `LOG_FORMAT=json` writes one JSON object a line (production, log shippers); anything
 * else, or unset, a readable terminal format. `LOG_LEVEL` (default Info) sets the minimum level.
 * Lines carry the annotations the engine sets (jobId, jobType, stage, attempt, workerId) and
 * never job input, snapshot content, provider output or keys. JSON lines written inside a span
 * carry its `trace_id` and `span_id`, so a log shipper can join them to the trace.
 */
export const LoggingLive = Layer.unwrapEffect(
  Effect.gen(function*() {
    const { format, level } = yield* LoggingSettings
    const logger = format === "json"
      ? batchedToStdout(jsonLoggerWithTrace)
      : format === "logfmt"
      ? batchedToStdout(Logger.logfmtLogger)
      : Logger.pretty
    return Layer.merge(logger, Logger.minimumLogLevel(level))
  })
).pipe(Layer.provide(LoggingSettings.layer))
