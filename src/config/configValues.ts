import { Config, Duration } from "effect"

/** A positive whole number read from `name`, `fallback` when unset; a bad value fails at start naming the variable. */
export const positiveWhole = (name: string, fallback: number, unit?: string) =>
  Config.integer(name).pipe(
    Config.withDefault(fallback),
    Config.validate({
      message: `${name} must be a positive whole number${unit === undefined ? "" : ` of ${unit}`}`,
      validation: (n) => n > 0
    })
  )

const positiveMillis = (name: string, fallback: number) => positiveWhole(name, fallback, "milliseconds")

/** A positive duration read from `name` as a whole number of milliseconds (the variable keeps its `_MS` format). */
export const positiveMillisDuration = (name: string, fallback: Duration.Duration) =>
  positiveMillis(name, Duration.toMillis(fallback)).pipe(Config.map(Duration.millis))

/** Like `positiveMillisDuration`, none when `name` is unset (the caller derives it from another setting). */
export const optionalMillisDuration = (name: string) =>
  Config.option(
    Config.integer(name).pipe(
      Config.validate({ message: `${name} must be a positive whole number of milliseconds`, validation: (n) => n > 0 }),
      Config.map(Duration.millis)
    )
  )

/** A positive duration read from `name` as a whole number of seconds (the variable keeps its `_S` format). */
export const positiveSecondsDuration = (name: string, fallback: Duration.Duration) =>
  positiveWhole(name, Duration.toSeconds(fallback), "seconds").pipe(Config.map(Duration.seconds))
